"""Drive a live dummynet daemon from Python.

``dummynet.Client`` speaks the daemon's control socket (one JSON line each
way per connection); ``dummynet.shell()`` and ``dummynet.daemon()`` start an
emulated link for a test and stop it afterwards; the pytest plugin
(``dummynet.pytest_plugin``, loaded by pytest once this is installed) gives
the fixtures ``dummynet_bin`` and ``dummynet_shell``.

    import dummynet
    client = dummynet.Client("/run/dummynet.sock")
    client.pipe(1).config(bw="10Mbit/s", delay="20ms", plr=0.01)
"""

from .client import DEFAULT_SOCKET, Client, Pipe, Queue, Sched
from .errors import (
    DaemonError,
    DaemonNotRunning,
    DummynetError,
    PermissionDenied,
    ProtocolError,
    WrongBinary,
)
from .refusals import (
    Busy,
    CommandError,
    CommandSyntaxError,
    Conflict,
    Denied,
    InvalidCommand,
    NotFound,
    Pending,
    Stopped,
    Timeout,
    Unavailable,
)
from .reply import ErrorAt, Reply
from ._version import __version__
from .process import Daemon, Shell, binary_version, daemon, find_binary, shell

__all__ = [
    "DEFAULT_SOCKET",
    "Busy",
    "Client",
    "CommandError",
    "CommandSyntaxError",
    "Conflict",
    "Daemon",
    "DaemonError",
    "DaemonNotRunning",
    "Denied",
    "DummynetError",
    "ErrorAt",
    "InvalidCommand",
    "NotFound",
    "Pending",
    "PermissionDenied",
    "Pipe",
    "ProtocolError",
    "Queue",
    "Reply",
    "Sched",
    "Shell",
    "Stopped",
    "Timeout",
    "Unavailable",
    "WrongBinary",
    "__version__",
    "daemon",
    "binary_version",
    "find_binary",
    "shell",
]
