"""Which binary the client starts, and its refusal of one that is not
this project's or not this client's release (no root needed: stand-in
programs print a ``--version`` line)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import dummynet
from dummynet import process

ROOT = Path(__file__).resolve().parents[3]


def stand_in(tmp_path: Path, version_line: str, status: int = 0) -> str:
    """An executable ``dummynet`` that prints ``version_line`` and exits
    with ``status``."""
    path = tmp_path / "dummynet"
    path.write_text(f"#!/bin/sh\necho '{version_line}'\nexit {status}\n")
    path.chmod(0o755)
    return str(path)


def test_another_program_called_dummynet_is_refused(tmp_path: Path) -> None:
    exe = stand_in(tmp_path, "usage: dummynet [-h] {run,show}")
    with pytest.raises(dummynet.WrongBinary, match=r"is not dummynet for Linux: its --version said 'usage: dummynet"):
        dummynet.binary_version(exe)


def test_a_failing_version_is_refused(tmp_path: Path) -> None:
    exe = stand_in(tmp_path, f"dummynet {dummynet.__version__}", status=2)
    with pytest.raises(dummynet.WrongBinary, match="is not dummynet for Linux"):
        dummynet.binary_version(exe)


def test_another_release_is_refused_and_named(tmp_path: Path) -> None:
    exe = stand_in(tmp_path, "dummynet 9.9.9 (0123456789 2026-01-01)")
    with pytest.raises(dummynet.WrongBinary) as raised:
        dummynet.binary_version(exe)
    said = str(raised.value)
    assert f"is dummynet 9.9.9 but this client is {dummynet.__version__}" in said
    assert f"dummynet-linux=={dummynet.__version__}" in said


def test_this_release_is_taken_with_or_without_a_commit(tmp_path: Path) -> None:
    with_commit = stand_in(tmp_path, f"dummynet {dummynet.__version__} (0123456789 2026-01-01)")
    assert dummynet.binary_version(with_commit) == dummynet.__version__
    bare = tmp_path / "bare"
    bare.mkdir()
    assert dummynet.binary_version(stand_in(bare, f"dummynet {dummynet.__version__}")) == dummynet.__version__


def test_find_binary_checks_dummynet_bin(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("DUMMYNET_BIN", stand_in(tmp_path, "dummynet 10.2.0"))
    with pytest.raises(dummynet.WrongBinary, match="is dummynet 10.2.0 but this client is"):
        dummynet.find_binary()


def test_a_shell_with_a_wrong_binary_does_not_start(tmp_path: Path) -> None:
    exe = stand_in(tmp_path, "something else 1.0")
    with pytest.raises(dummynet.WrongBinary):
        with dummynet.shell(binary=exe):
            pytest.fail("the shell started")


def test_the_plugin_fails_on_a_wrong_binary_even_without_require(pytester: Any, monkeypatch: Any, tmp_path: Path) -> None:
    monkeypatch.setenv("DUMMYNET_BIN", stand_in(tmp_path, "dummynet 9.9.9"))
    monkeypatch.delenv("DUMMYNET_REQUIRE", raising=False)
    pytester.makepyfile("def test_bin(dummynet_bin):\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*is dummynet 9.9.9 but this client is*"])


def test_semver_prereleases_compare_as_python_writes_them() -> None:
    assert process._pep440("0.1.0") == "0.1.0"
    assert process._pep440("0.2.0-rc.1") == "0.2.0rc1"
    assert process._pep440("1.0.0-beta.2") == "1.0.0b2"


def test_the_client_is_the_crates_release() -> None:
    cargo = ROOT / "Cargo.toml"
    if not cargo.is_file():
        pytest.skip("not run from the repository")
    found = re.search(r'^version = "([^"]+)"', cargo.read_text(), re.M)
    assert found is not None
    assert process._pep440(found.group(1)) == dummynet.__version__


@pytest.mark.skipif(os.environ.get("DUMMYNET_FROM_WHEEL", "") in ("", "0"), reason="set DUMMYNET_FROM_WHEEL=1 when testing an installed wheel")
def test_the_wheel_finds_its_own_binary(monkeypatch: Any) -> None:
    monkeypatch.delenv("DUMMYNET_BIN", raising=False)
    assert shutil.which("dummynet") is None, "CI runs this with no dummynet on PATH"
    assert not Path(dummynet.__file__).is_relative_to(ROOT), f"the client imported is the checkout's: {dummynet.__file__}"
    found = dummynet.find_binary()
    assert found == process._wheel_binary()
    assert dummynet.binary_version(found) == dummynet.__version__
