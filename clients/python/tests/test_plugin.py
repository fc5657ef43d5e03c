"""The pytest plugin as a user's test suite sees it: its fixtures are
there once the package is installed, and a missing binary skips (or, with
DUMMYNET_REQUIRE=1, fails) rather than erroring."""

from __future__ import annotations

from typing import Any

SUITE = """
def test_uses_a_shell(dummynet_shell):
    dummynet_shell(up="delay 1ms")
"""


def test_without_the_binary_the_fixtures_skip(pytester: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("DUMMYNET_BIN", str(pytester.path / "no-such-dummynet"))
    monkeypatch.delenv("DUMMYNET_REQUIRE", raising=False)
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*no-such-dummynet is not an executable file*"])


def test_with_dummynet_require_a_missing_binary_fails(pytester: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("DUMMYNET_BIN", str(pytester.path / "no-such-dummynet"))
    monkeypatch.setenv("DUMMYNET_REQUIRE", "1")
    pytester.makepyfile(SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(errors=1)
