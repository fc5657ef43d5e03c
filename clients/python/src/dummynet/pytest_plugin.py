"""pytest fixtures for tests behind an emulated link (entry point
``pytest11``: loaded by pytest once the package is installed).

- ``dummynet_bin``: the binary's path (``$DUMMYNET_BIN``, else the one
  installed with this package, else ``dummynet`` on PATH); a program there
  that is not this project's, or not this client's release, fails the test
  (:class:`dummynet.WrongBinary`), it is not skipped.
- ``dummynet_shell``: a factory; ``dummynet_shell(up="delay 20ms")`` starts
  a :func:`dummynet.shell` with those arguments and returns its
  :class:`dummynet.Shell`; every shell it started is stopped after the test.

Both skip the test without root (a shell makes namespaces) or without the
binary. Set ``DUMMYNET_REQUIRE=1`` (as CI does) to make that a failure
instead, so that a broken setup cannot pass as skipped tests.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Callable, Iterator, NoReturn

import pytest

from .errors import DummynetError, WrongBinary
from .process import Shell, find_binary, shell


def _unusable(why: str) -> NoReturn:
    if os.environ.get("DUMMYNET_REQUIRE", "") not in ("", "0"):
        pytest.fail(f"{why} (DUMMYNET_REQUIRE is set, so this is not skipped)", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="session")
def dummynet_bin() -> str:
    """The dummynet binary; skips without one."""
    try:
        return find_binary()
    except WrongBinary as e:
        pytest.fail(str(e), pytrace=False)
    except DummynetError as e:
        _unusable(str(e))


@pytest.fixture
def dummynet_shell(dummynet_bin: str) -> Iterator[Callable[..., Shell]]:
    """A factory of :func:`dummynet.shell`: call it with the same arguments;
    the shells are stopped (and waited for) after the test. Skips without
    root."""
    if os.geteuid() != 0:
        _unusable("dummynet shell needs root (it makes network namespaces)")
    with contextlib.ExitStack() as stack:

        def start(*args: Any, **kwargs: Any) -> Shell:
            kwargs.setdefault("binary", dummynet_bin)
            return stack.enter_context(shell(*args, **kwargs))

        yield start
