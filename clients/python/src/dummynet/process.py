"""Emulated links for tests: ``dummynet shell`` and ``dummynet run``
started and stopped from Python.

:func:`shell` starts ``dummynet shell`` with its own control socket and, as
its command, a placeholder that says where it is and then waits on its
standard input; commands are run in its network namespace with
``nsenter --net=/proc/PID/ns/net``. Closing that standard input ends the
placeholder and with it the shell, which removes its namespaces, veth and
socket. :func:`daemon` starts ``dummynet run --bridge``. Both wait until
the control socket answers, raise :class:`~dummynet.errors.DaemonError`
with the process's stderr if it does not start, and on exit stop the
process and wait for it, exceptions or not.

The binary is ``$DUMMYNET_BIN`` if set, else the one the ``dummynet-linux``
wheel installed with this package, else ``dummynet`` on ``PATH``; it must
say (``--version``) that it is this project's, of this client's release.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import re
import selectors
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO, Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .client import Client
from ._version import __version__
from .errors import DaemonError, DummynetError, WrongBinary

#: How long a shell or daemon may take to start, in seconds.
START_TIMEOUT = 20.0
#: How long it may take to stop once asked, before it is killed.
STOP_TIMEOUT = 15.0


#: The distribution whose wheel carries the binary next to this client.
DISTRIBUTION = "dummynet-linux"

# `dummynet --version`: "dummynet 0.1.0 (0123456789 2026-11-28)", the
# commit part absent in a build from outside git.
_VERSION_LINE = re.compile(r"dummynet (\d+\.\d+\.\d+(?:-[0-9A-Za-z.]+)?)(?: \(.*\))?")


def _wheel_binary() -> Optional[str]:
    """The ``dummynet`` script installed with this distribution (the wheel
    carries it), wherever its environment keeps scripts; None if this
    client was not installed from the wheel."""
    try:
        dist = importlib.metadata.distribution(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None
    for f in dist.files or ():
        if f.name == "dummynet" and f.parent.name in ("bin", "scripts", "Scripts"):
            path = os.fspath(dist.locate_file(f))
            if os.path.isfile(path) and os.access(path, os.X_OK):
                return os.path.abspath(path)
    return None


def find_binary() -> str:
    """The dummynet binary, checked with :func:`binary_version`:
    ``$DUMMYNET_BIN``, else the one installed with this package (from the
    wheel), else ``dummynet`` on PATH. :class:`~dummynet.errors.DummynetError`
    if there is none, :class:`~dummynet.errors.WrongBinary` if the one found
    is not ours or not this client's release."""
    given = os.environ.get("DUMMYNET_BIN")
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise DummynetError(f"DUMMYNET_BIN={given} is not an executable file")
        found: Optional[str] = given
    else:
        found = _wheel_binary() or shutil.which("dummynet")
    if found is None:
        raise DummynetError(f"no dummynet binary: set DUMMYNET_BIN, install the {DISTRIBUTION} wheel, or put `dummynet` on PATH")
    binary_version(found)
    return found


def _pep440(version: str) -> str:
    """A Cargo (semver) version as Python packaging writes it:
    ``0.2.0-rc.1`` → ``0.2.0rc1``."""
    release, _, pre = version.partition("-")
    if not pre:
        return release
    pre = pre.replace(".", "")
    for long, short in (("alpha", "a"), ("beta", "b")):
        pre = pre.replace(long, short)
    return release + pre


_checked: Dict[Tuple[str, int, int], str] = {}


def binary_version(path: str) -> str:
    """The release of the dummynet binary at ``path`` (its ``--version``),
    once it is known to be this project's and the same release as this
    client (:data:`dummynet.__version__`); raises
    :class:`~dummynet.errors.WrongBinary` otherwise. Another program
    called ``dummynet`` (an unrelated project has a package of that name)
    fails here rather than with a puzzling error later."""
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
    if key in _checked:
        return _checked[key]
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise WrongBinary(f"{path} --version did not answer ({e}): is it dummynet for Linux?") from None
    line = done.stdout.strip().splitlines()[0] if done.stdout.strip() else ""
    found = _VERSION_LINE.fullmatch(line) if done.returncode == 0 else None
    if found is None:
        said = line or done.stderr.strip()[:200] or f"exit status {done.returncode}"
        raise WrongBinary(
            f"{path} is not dummynet for Linux: its --version said {said!r}, not 'dummynet {__version__} (...)'; "
            f"set DUMMYNET_BIN to this project's binary (pip name {DISTRIBUTION})"
        )
    version = found.group(1)
    if _pep440(version) != __version__:
        raise WrongBinary(
            f"{path} is dummynet {version} but this client is {__version__}: "
            f"install the same release of both (pip install {DISTRIBUTION}=={__version__}), or set DUMMYNET_BIN"
        )
    _checked[key] = version
    return version


def _stderr_of(log: IO[bytes]) -> str:
    log.flush()
    log.seek(0)
    return log.read().decode(errors="replace")


def _stop(proc: "subprocess.Popen[bytes]", first: Optional[int]) -> None:
    """Asks ``proc`` to stop with signal ``first`` (``None``: it was asked
    already), then SIGKILL if it has not ended within the bound."""
    if proc.poll() is not None:
        return
    if first is not None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(first)
    try:
        proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_for_socket(proc: "subprocess.Popen[bytes]", client: Client, deadline: float) -> None:
    """Until the daemon answers on its socket; raises if it exits first."""
    while True:
        if proc.poll() is not None:
            raise DaemonError(f"it exited with status {proc.returncode} before its socket answered", returncode=proc.returncode)
        try:
            client.request({"stats": True})
            return
        except DummynetError:
            pass
        if time.monotonic() > deadline:
            raise DaemonError(f"its socket {client.socket} did not answer within {START_TIMEOUT:.0f} s")
        time.sleep(0.05)


@dataclass
class Shell:
    """A running ``dummynet shell``: ``client`` drives its emulator (pipe 1
    carries the shell's outgoing traffic, pipe 2 the incoming), ``run()``
    runs a command in its namespace, ``peer`` is the host-side address
    (``$DUMMYNET_PEER``) and ``addr`` the shell's own."""

    client: Client
    pid: int
    """The placeholder command's pid: its namespace is the shell's."""
    peer: str
    addr: str
    peer6: Optional[str] = None
    addr6: Optional[str] = None
    env: Dict[str, str] = field(default_factory=dict)
    """``DUMMYNET_PEER``, ``DUMMYNET_ADDR``, ``DUMMYNET_SOCKET`` (and the
    IPv6 ones), as the shell gives its command."""

    def command(self, argv: Sequence[str]) -> List[str]:
        """``argv`` prefixed so that it runs in the shell's namespace."""
        return ["nsenter", f"--net=/proc/{self.pid}/ns/net", "--", *argv]

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, check: bool = False, **kwargs: Any) -> "subprocess.CompletedProcess[str]":
        """Runs ``argv`` inside the shell's network namespace with the
        shell's variables and returns it finished (output captured as text
        unless told otherwise; ``timeout`` in seconds)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        env = dict(kwargs.pop("env", None) or os.environ)
        env.update(self.env)
        return subprocess.run(self.command(argv), timeout=timeout, check=check, env=env, **kwargs)

    def popen(self, argv: Sequence[str], **kwargs: Any) -> "subprocess.Popen[Any]":
        """Starts ``argv`` inside the namespace (the caller waits for it)."""
        env = dict(kwargs.pop("env", None) or os.environ)
        env.update(self.env)
        return subprocess.Popen(self.command(argv), env=env, **kwargs)


# The placeholder command: says where it is, then waits until its standard
# input (ours) closes. `exec` keeps the pid that was printed.
_PLACEHOLDER = (
    'echo "dummynet-shell-ready $$ $DUMMYNET_PEER $DUMMYNET_ADDR '
    '${DUMMYNET_PEER6:--} ${DUMMYNET_ADDR6:--}"; exec cat >/dev/null'
)


def _shell_args(preset: Optional[str], up: Optional[str], down: Optional[str], config: Union[str, "os.PathLike[str]", None], nat: str, seed: Optional[int], extra: Sequence[str]) -> List[str]:
    args: List[str] = []
    for flag, value in (("--preset", preset), ("--up", up), ("--down", down)):
        if value is not None:
            args += [flag, value]
    if config is not None:
        args += ["--config", os.fspath(config)]
    if seed is not None:
        args += ["--seed", str(seed)]
    args += ["--nat", nat, *extra]
    return args


@contextlib.contextmanager
def shell(
    preset: Optional[str] = None,
    *,
    up: Optional[str] = None,
    down: Optional[str] = None,
    config: Union[str, "os.PathLike[str]", None] = None,
    nat: str = "off",
    seed: Optional[int] = None,
    args: Sequence[str] = (),
    binary: Optional[str] = None,
) -> Iterator[Shell]:
    """Starts ``dummynet shell`` (as root) and yields a :class:`Shell`.

    ``preset``, ``up``, ``down``, ``config`` and ``seed`` are the shell's
    options (``up="delay 20ms"``: pipe 1's configuration). ``nat`` is
    ``off`` by default, so a test reaches this host (``peer``) and nothing
    beyond, and the host's forwarding is left alone; ``"auto"`` lets the
    shell's traffic out as the command line's default does. ``args`` are
    more options for ``dummynet shell``.
    """
    exe = binary or find_binary()
    binary_version(exe)
    workdir = tempfile.mkdtemp(prefix="dummynet-shell-")
    sock = os.path.join(workdir, "control.sock")
    argv = [exe, "shell", "--socket", sock, *_shell_args(preset, up, down, config, nat, seed, args), "--", "/bin/sh", "-c", _PLACEHOLDER]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    try:
        try:
            sh = _shell_started(proc, sock)
        except DaemonError as e:
            _stop(proc, signal.SIGTERM)
            raise DaemonError(f"dummynet shell did not start: {e.args[0].splitlines()[0]}", _stderr_of(log), proc.returncode) from None
        yield sh
    finally:
        # The placeholder ends when its input closes; the shell follows it.
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            _stop(proc, signal.SIGTERM)
        if proc.stdout is not None:
            proc.stdout.close()
        stderr = _stderr_of(log)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
    # Reached only without an exception from the body: a shell that failed
    # on its way out says so.
    if proc.returncode != 0:
        raise DaemonError(f"dummynet shell exited with status {proc.returncode}", stderr, proc.returncode)


def _shell_started(proc: "subprocess.Popen[bytes]", sock: str) -> Shell:
    """Reads the placeholder's line, then waits for the socket."""
    deadline = time.monotonic() + START_TIMEOUT
    assert proc.stdout is not None
    line = b""
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while not line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0:
                raise DaemonError(f"no word from its command within {START_TIMEOUT:.0f} s")
            if not sel.select(left):
                continue
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                proc.wait(STOP_TIMEOUT)
                raise DaemonError(f"it exited with status {proc.returncode} before its command started", returncode=proc.returncode)
            line += chunk
    words = line.decode(errors="replace").split()
    if len(words) != 6 or words[0] != "dummynet-shell-ready" or not words[1].isdigit():
        raise DaemonError(f"unexpected first line from its command: {line!r}")
    _, pid, peer, addr, peer6, addr6 = words
    client = Client(sock)
    _wait_for_socket(proc, client, deadline)
    env = {"DUMMYNET_PEER": peer, "DUMMYNET_ADDR": addr, "DUMMYNET_SOCKET": sock}
    v6 = (None, None) if peer6 == "-" else (peer6, addr6)
    if v6[0] is not None:
        env.update(DUMMYNET_PEER6=peer6, DUMMYNET_ADDR6=addr6)
    return Shell(client=client, pid=int(pid), peer=peer, addr=addr, peer6=v6[0], addr6=v6[1], env=env)


@dataclass
class Daemon:
    """A running ``dummynet run``: ``client`` drives it; ``pid`` is its
    process."""

    client: Client
    pid: int


@contextlib.contextmanager
def daemon(
    bridge: Optional[Tuple[str, str]] = None,
    *,
    host: bool = False,
    config: Union[str, "os.PathLike[str]", None] = None,
    default_allow: bool = False,
    netns: Optional[str] = None,
    socket: Union[str, "os.PathLike[str]", None] = None,
    args: Sequence[str] = (),
    binary: Optional[str] = None,
) -> Iterator[Daemon]:
    """Starts ``dummynet run --bridge A B`` (or ``--host``) with a control
    socket of its own (a temporary one unless ``socket`` is given) and
    yields a :class:`Daemon`; on exit sends it SIGTERM and waits.

    ``netns`` runs it inside a named namespace (``ip netns exec NAME``),
    where a test keeps the interfaces it bridges. ``args`` are more
    options for ``dummynet run``.
    """
    if (bridge is None) == (not host):
        raise ValueError("give bridge=(IF_A, IF_B) or host=True (one of them)")
    exe = binary or find_binary()
    binary_version(exe)
    workdir = tempfile.mkdtemp(prefix="dummynet-run-")
    sock = os.fspath(socket) if socket is not None else os.path.join(workdir, "control.sock")
    argv = [exe, "run"]
    argv += ["--bridge", *bridge] if bridge is not None else ["--host"]
    argv += ["--socket", sock]
    if config is not None:
        argv += ["--config", os.fspath(config)]
    if default_allow:
        argv.append("--default-allow")
    argv += list(args)
    if netns is not None:
        argv = ["ip", "netns", "exec", netns, *argv]
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    client = Client(sock)
    try:
        try:
            _wait_for_socket(proc, client, time.monotonic() + START_TIMEOUT)
        except DaemonError as e:
            _stop(proc, signal.SIGTERM)
            raise DaemonError(f"dummynet run did not start: {e.args[0].splitlines()[0]}", _stderr_of(log), proc.returncode) from None
        yield Daemon(client=client, pid=proc.pid)
    finally:
        _stop(proc, signal.SIGTERM)
        stderr = _stderr_of(log)
        log.close()
        shutil.rmtree(workdir, ignore_errors=True)
    if proc.returncode != 0:
        raise DaemonError(f"dummynet run exited with status {proc.returncode}", stderr, proc.returncode)
