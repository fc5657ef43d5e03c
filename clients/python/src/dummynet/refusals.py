"""A command the daemon refused, as exception classes.

A refused command raises a subclass of :class:`CommandError` chosen by the
``kind`` the daemon puts on its reply; a daemon that predates kinds is read
by its exit status instead (sysexits, as ``ipfw`` uses them: 64 bad syntax,
65 a value the engine refused, 69 unavailable, 75 still pending). Every
exception carries the daemon's reply, so nothing it said is lost.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

from .errors import DummynetError
from .reply import ErrorAt, Reply


class CommandError(DummynetError):
    """The daemon refused a command: ``reply`` is its answer, ``command``
    the text sent (commands joined by newlines for a batch)."""

    def __init__(self, reply: "Reply", command: str):
        text = reply.stderr.strip() or f"exit status {reply.status}"
        at = reply.error
        if at is not None and at.index is not None:
            command = f"command {at.index + 1} of the batch, {at.command}"
        super().__init__(f"{command!r}: {text}")
        self.reply = reply
        self.command = command

    @property
    def status(self) -> int:
        return self.reply.status

    @property
    def kind(self) -> Optional[str]:
        return self.reply.kind

    @property
    def error(self) -> "Optional[ErrorAt]":
        """Where it went wrong, from daemons that say: which command of a
        batch, the column and the culprit's text."""
        return self.reply.error


class CommandSyntaxError(CommandError):
    """The command does not parse (kind ``syntax``; exit status 64)."""


class InvalidCommand(CommandError):
    """It parses, but the engine refused it (kind ``invalid``; status 65)."""


class NotFound(InvalidCommand):
    """It names a pipe, queue, scheduler, rule or table that does not
    exist (kind ``not_found``)."""


class Conflict(InvalidCommand):
    """At odds with what exists: a table already there or still in use, no
    room for another schedule (kind ``conflict``)."""


class Unavailable(CommandError):
    """The daemon cannot do this now or at all (kind ``unavailable``;
    status 69): a feature it lacks, a file it may not read."""


class Busy(Unavailable):
    """Too many clients at once: try again (kind ``busy``)."""


class Stopped(Unavailable):
    """The daemon's data plane has stopped (kind ``stopped``)."""


class Denied(Unavailable):
    """The daemon refused this caller the socket (kind ``denied``)."""


class Timeout(Unavailable):
    """The data plane did not take the request in time: it was withdrawn
    and will not take effect (kind ``timeout``)."""


class Pending(Timeout):
    """The data plane took the request but did not answer in time: it may
    yet take effect, so look before trying again (kind ``pending``; exit
    status 75)."""


#: The error class for each ``kind`` a reply may carry.
KINDS: Dict[str, Type[CommandError]] = {
    "syntax": CommandSyntaxError,
    "invalid": InvalidCommand,
    "not_found": NotFound,
    "conflict": Conflict,
    "unavailable": Unavailable,
    "busy": Busy,
    "denied": Denied,
    "stopped": Stopped,
    "timeout": Timeout,
    "pending": Pending,
    "internal": CommandError,
}

# The same by exit status, for replies without a kind.
_STATUSES: Dict[int, Type[CommandError]] = {
    64: CommandSyntaxError,
    65: InvalidCommand,
    69: Unavailable,
    75: Pending,
}


def error_for(reply: "Reply", command: str) -> CommandError:
    """The exception for a reply whose status is not 0: by its kind, or by
    its status when it has none or one this package does not know."""
    if reply.kind is not None and reply.kind in KINDS:
        cls = KINDS[reply.kind]
    else:
        cls = _STATUSES.get(reply.status, CommandError)
        # A daemon without kinds still says these in words.
        stderr = reply.stderr
        if cls is Unavailable and "busy:" in stderr:
            cls = Busy
        elif cls is Unavailable and "has stopped" in stderr:
            cls = Stopped
        elif cls is Unavailable and "did not answer within" in stderr:
            cls = Timeout
        elif cls is InvalidCommand and "does not exist" in stderr:
            cls = NotFound
    return cls(reply, command)
