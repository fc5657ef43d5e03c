"""What can go wrong talking to a dummynet daemon, as exception classes:
the base of them all, and what fails before the daemon has answered (no
daemon, no permission, an answer that cannot be read, a wrong binary, a
daemon that did not start). A command the daemon refused raises one of
:mod:`dummynet.refusals`.
"""

from __future__ import annotations

from typing import Optional


class DummynetError(Exception):
    """Base of every error this package raises."""


class DaemonNotRunning(DummynetError):
    """Nobody listens on the control socket (no such file, or refused)."""


class PermissionDenied(DummynetError):
    """The control socket is root's (and its ``--socket-group``'s)."""


class ProtocolError(DummynetError):
    """The daemon's answer could not be read (cut short, not JSON)."""


class WrongBinary(DummynetError):
    """The ``dummynet`` program found is not this project's, or not the
    release this client belongs to (its ``--version`` says which)."""


class DaemonError(DummynetError):
    """A daemon or shell this package started failed to start or to stop.

    ``stderr`` is what the process printed, ``returncode`` its exit status
    if it had ended.
    """

    def __init__(self, message: str, stderr: str = "", returncode: Optional[int] = None):
        super().__init__(message + (f"\n--- its stderr:\n{stderr.rstrip()}" if stderr.strip() else ""))
        self.stderr = stderr
        self.returncode = returncode
