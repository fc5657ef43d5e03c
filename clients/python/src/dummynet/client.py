"""The daemon's control socket, from Python.

One request per connection, one JSON line each way, as ``dummynet ipfw``
speaks it (crates/daemon/src/control.rs): ``{"argv": [...], "cwd":
"..."}`` for a command, ``{"stats": true, "json": true}`` for the data
plane's report, ``{"commands": [...]}`` for a batch applied all or
nothing; the answer is ``{"status": N, "stdout": "...", "stderr": "..."}``,
with a ``kind`` on errors from daemons that give one.

Commands are built as token lists, never by pasting text: a value with
whitespace in it would become more tokens (the daemon reads the tokens as
one line), so it is refused here, before anything is sent.
"""

from __future__ import annotations

import datetime
import json
import os
import socket as _socket
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from . import errors, refusals
from .reply import ErrorAt, Reply

#: Where the daemon listens unless told otherwise (as ``dummynet run``).
DEFAULT_SOCKET = "/run/dummynet.sock"

#: The longest answer read (``show`` of a million flows is large; this
#: bounds a broken peer), as the Rust client does.
MAX_REPLY = 256 << 20

#: A command: one line of text, or its tokens.
Command = Union[str, Sequence[str]]

#: What an option keyword may be given as (see :func:`option_tokens`).
OptionValue = Union[str, int, float, bool, datetime.timedelta, Sequence[str], None]

# Options that take a time: a bare number would be milliseconds to the
# daemon and seconds to a Python reader, so only text or a timedelta.
_TIME_OPTIONS = frozenset({"delay", "jitter"})


def check_token(token: str, what: str = "a token") -> str:
    """``token`` if it is one token of the language: not empty, and no
    whitespace that would split it into several (or a newline that would
    start another command)."""
    if not isinstance(token, str):
        raise TypeError(f"{what} must be a str, not {type(token).__name__}: {token!r}")
    if not token:
        raise ValueError(f"{what} is empty")
    if any(c.isspace() for c in token) or "\0" in token:
        raise ValueError(f"{what} {token!r} contains whitespace: it would be read as several tokens")
    return token


def duration_text(value: datetime.timedelta) -> str:
    """A time as the language writes it: whole milliseconds as ``20ms``,
    anything finer in microseconds (``250us``)."""
    micros = value // datetime.timedelta(microseconds=1)
    if micros < 0:
        raise ValueError(f"a negative time: {value}")
    if micros % 1000 == 0:
        return f"{micros // 1000}ms"
    return f"{micros}us"


def _number_text(value: Union[int, float]) -> str:
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"not a finite number: {value}")
        # Plain decimal notation: the language has no exponents.
        text = f"{value:.12f}".rstrip("0").rstrip(".")
        return text or "0"
    return str(value)


def option_tokens(name: str, value: OptionValue) -> List[str]:
    """The tokens for one keyword option of ``pipe N config`` and the like.

    - ``str``: the value as written in the language (``bw="10Mbit/s"``,
      ``delay="20ms"``); always works.
    - ``datetime.timedelta``: a time (``delay=timedelta(milliseconds=20)``).
    - ``int``/``float``: the number (``plr=0.01``, ``queue=50``); for ``bw``
      a number is **bit/s** (``bw=10_000_000``). ``delay`` and ``jitter``
      refuse bare numbers: give a string with its unit or a timedelta.
    - ``True``: the option word alone (a flag such as ``noerror=True``);
      ``False``/``None``: left out.
    - a list or tuple of strings: several tokens after the option word
      (``mask=("dst-ip", "0xffffff00")``).
    """
    word = check_token(name, "an option name")
    if value is None or value is False:
        return []
    if value is True:
        return [word]
    if isinstance(value, datetime.timedelta):
        return [word, duration_text(value)]
    if isinstance(value, (int, float)):
        if name in _TIME_OPTIONS:
            raise TypeError(
                f"{name}={value!r}: give a time with its unit ({name}=\"20ms\") or a "
                f"datetime.timedelta; a bare number would be milliseconds to the daemon"
            )
        if name == "bw":
            if value < 0:
                raise ValueError(f"bw={value!r}: a bandwidth is not negative")
            return [word, f"{_number_text(value)}bit/s"]
        return [word, _number_text(value)]
    if isinstance(value, str):
        return [word, check_token(value, f"the value of {name}")]
    if isinstance(value, (list, tuple)):
        return [word] + [check_token(v, f"a value of {name}") for v in value]
    raise TypeError(f"{name}={value!r}: a str, number, timedelta, bool or list of str, not {type(value).__name__}")


def options_tokens(options: Mapping[str, OptionValue]) -> List[str]:
    """The tokens of all ``options``, in the order given."""
    out: List[str] = []
    for name, value in options.items():
        out.extend(option_tokens(name, value))
    return out


def command_tokens(command: Command) -> List[str]:
    """One command's tokens: a string is split on whitespace (one line
    only: several commands go to :meth:`Client.apply`), a sequence is taken
    token by token."""
    if isinstance(command, str):
        if "\n" in command.strip() or "\r" in command:
            raise ValueError(f"{command!r} is several lines: one command per call (Client.apply takes several)")
        tokens = command.split()
    else:
        tokens = [check_token(t) for t in command]
    if not tokens:
        raise ValueError("an empty command")
    return tokens


class Client:
    """A dummynet daemon's control socket.

    ``socket`` defaults to ``$DUMMYNET_SOCKET``, else ``/run/dummynet.sock``;
    ``timeout`` bounds each call in seconds (the daemon itself gives up on
    the data plane after 10 s, and says so).
    """

    def __init__(self, socket: Union[str, "os.PathLike[str]", None] = None, *, timeout: float = 30.0):
        if socket is None:
            socket = os.environ.get("DUMMYNET_SOCKET", DEFAULT_SOCKET)
        self.socket = os.fspath(socket)
        self.timeout = timeout

    def __repr__(self) -> str:
        return f"dummynet.Client(socket={self.socket!r})"

    # The wire.

    def request(self, req: Mapping[str, Any]) -> Reply:
        """Sends one request object and returns the answer as it came,
        whatever its status (the methods below raise on errors)."""
        line = (json.dumps(req) + "\n").encode()
        conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            conn.settimeout(self.timeout)
            try:
                conn.connect(self.socket)
            except PermissionError:
                raise errors.PermissionDenied(
                    f"permission denied on {self.socket}: the control socket is for root "
                    f"(and the daemon's --socket-group)"
                ) from None
            except (FileNotFoundError, ConnectionRefusedError):
                raise errors.DaemonNotRunning(
                    f"no dummynet daemon is listening on {self.socket}: start one "
                    f"(`dummynet run ...`, or dummynet.daemon() / dummynet.shell()) "
                    f"or point DUMMYNET_SOCKET at its socket"
                ) from None
            try:
                conn.sendall(line)
                data = _read_line(conn)
            except OSError as e:
                raise errors.ProtocolError(f"talking to the daemon on {self.socket}: {e}") from None
        finally:
            conn.close()
        return _decode_reply(data, self.socket)

    def call(self, req: Mapping[str, Any], what: str) -> Reply:
        """:meth:`request`, raising the :class:`~dummynet.refusals.CommandError`
        subclass that fits when the status is not 0 (``what`` names the
        command in the message)."""
        reply = self.request(req)
        if reply.status != 0:
            raise refusals.error_for(reply, what)
        return reply

    def _argv(self, tokens: List[str], json_output: bool = False) -> Dict[str, Any]:
        req: Dict[str, Any] = {"argv": tokens, "cwd": os.getcwd()}
        if json_output:
            req["json"] = True
        return req

    # Commands.

    def run(self, command: Command) -> Reply:
        """Runs one ipfw/dnctl command (``"pipe 1 config bw 10Mbit/s"``, or
        its tokens) and returns the daemon's reply; raises a
        :class:`~dummynet.refusals.CommandError` if it refused."""
        tokens = command_tokens(command)
        return self.call(self._argv(tokens), " ".join(tokens))

    def run_json(self, command: Command) -> Any:
        """A ``show`` command's answer as JSON (``"json": true``), for
        daemons that give one; :class:`~dummynet.refusals.Unavailable` from one
        that answers in text only."""
        tokens = command_tokens(command)
        what = " ".join(tokens)
        reply = self.call(self._argv(tokens, json_output=True), what)
        try:
            return json.loads(reply.stdout)
        except ValueError:
            raise refusals.Unavailable(
                Reply(69, reply.stdout, "this daemon answers `show` in text only (it predates --json); use the *_text() methods\n"),
                what,
            ) from None

    def apply(self, commands: Iterable[Command]) -> Reply:
        """Applies several commands all or nothing: if the daemon refuses one,
        none takes effect and the error says which. Needs a daemon that takes
        batches (``{"commands": [...]}``); an older one raises
        :class:`~dummynet.refusals.Unavailable` and applies nothing."""
        # Sent as words, as checked here, rather than lines to split again.
        words = [command_tokens(c) for c in commands]
        if not words:
            raise ValueError("an empty batch")
        what = "\n".join(" ".join(w) for w in words)
        reply = self.request({"commands": words, "cwd": os.getcwd()})
        if reply.status != 0 and reply.kind is None and "found nothing" in reply.stderr:
            # A daemon without batches reads the request as an empty command
            # line, and refuses it: nothing was applied.
            raise refusals.Unavailable(
                Reply(69, "", "this daemon does not take batches ({\"commands\": [...]}); nothing was applied\n"),
                what,
            )
        if reply.status != 0:
            raise refusals.error_for(reply, what)
        return reply

    def pipe(self, number: int) -> "Pipe":
        """Pipe ``number``: ``client.pipe(1).config(bw="10Mbit/s")``."""
        return Pipe(self, number)

    def queue(self, number: int) -> "Queue":
        """Queue (flowset) ``number``: ``client.queue(1).config(pipe=1, weight=10)``."""
        return Queue(self, number)

    def sched(self, number: int) -> "Sched":
        """Scheduler ``number``: ``client.sched(1).config(type="fq_codel")``."""
        return Sched(self, number)

    def add_rule(self, rule: Command) -> Reply:
        """``ipfw add RULE``: ``client.add_rule("100 pipe 1 ip from any to any in")``."""
        return self.run(["add"] + command_tokens(rule))

    def delete_rule(self, number: int) -> Reply:
        """``ipfw delete NUMBER``; :class:`~dummynet.refusals.NotFound` if there is none."""
        return self.run(["delete", str(int(number))])

    def rules(self) -> Any:
        """``ipfw show`` as JSON (daemons with ``"json": true`` on show)."""
        return self.run_json(["show"])

    def rules_text(self) -> str:
        """``ipfw show`` as text, with counters."""
        return self.run(["show"]).stdout

    def stats(self) -> Dict[str, Any]:
        """``dummynet stats --json``: the data plane's report (``totals``,
        ``drops_by_reason``, ``lateness_ns``, ``backends``, ...; README:
        "stats --json")."""
        reply = self.call({"stats": True, "json": True}, "stats --json")
        value = reply.json()
        if not isinstance(value, dict):
            raise errors.ProtocolError(f"stats --json is not an object: {reply.stdout[:200]!r}")
        return value

    def stats_text(self) -> str:
        """``dummynet stats`` as text."""
        return self.call({"stats": True}, "stats").stdout

    def zero(self) -> None:
        """``ipfw zero``: the rules' counters back to 0."""
        self.run(["zero"])

    def flush(self) -> None:
        """``ipfw -q flush``: every rule but the default one removed."""
        self.run(["-q", "flush"])


class _Object:
    """A numbered pipe, queue or scheduler."""

    word = ""

    def __init__(self, client: Client, number: int):
        if isinstance(number, bool) or not isinstance(number, int) or number < 1:
            raise ValueError(f"a {self.word} number is a positive int, not {number!r}")
        self.client = client
        self.number = number

    def __repr__(self) -> str:
        return f"{self.client!r}.{self.word}({self.number})"

    def _tokens(self, *rest: str) -> List[str]:
        return [self.word, str(self.number), *rest]

    def config(self, **options: OptionValue) -> Reply:
        """``WORD N config OPTIONS``: the whole configuration (what is left
        out takes its default). See :func:`option_tokens` for the values."""
        return self.client.run(self._tokens("config", *options_tokens(options)))

    def modify(self, **options: OptionValue) -> Reply:
        """``WORD N modify OPTIONS``: only the options given change."""
        if not options:
            raise ValueError("modify() with no options changes nothing")
        return self.client.run(self._tokens("modify", *options_tokens(options)))

    def delete(self) -> Reply:
        """``WORD N delete``; :class:`~dummynet.refusals.NotFound` if absent."""
        return self.client.run(self._tokens("delete"))

    def show(self) -> Any:
        """``WORD N show`` as JSON (daemons that give it)."""
        return self.client.run_json(self._tokens("show"))

    def show_text(self) -> str:
        """``WORD N show`` as text (empty if it does not exist)."""
        return self.client.run(self._tokens("show")).stdout


class Pipe(_Object):
    word = "pipe"


class Queue(_Object):
    word = "queue"


class Sched(_Object):
    word = "sched"


def _read_line(conn: _socket.socket) -> bytes:
    chunks: List[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk:
            break
        if size > MAX_REPLY:
            raise OSError(f"an answer larger than {MAX_REPLY} bytes")
    data = b"".join(chunks)
    return data.split(b"\n", 1)[0] if b"\n" in data else data


def _decode_reply(data: bytes, where: str) -> Reply:
    if not data:
        raise errors.ProtocolError(f"the daemon on {where} closed the connection without answering")
    try:
        obj = json.loads(data)
    except ValueError as e:
        raise errors.ProtocolError(f"unreadable answer from {where}: {e}: {data[:200]!r}") from None
    if not isinstance(obj, dict):
        raise errors.ProtocolError(f"unreadable answer from {where}: not an object: {data[:200]!r}")
    status, stdout, stderr = obj.get("status"), obj.get("stdout", ""), obj.get("stderr", "")
    kind = obj.get("kind")
    if not isinstance(status, int) or not isinstance(stdout, str) or not isinstance(stderr, str):
        raise errors.ProtocolError(f"unreadable answer from {where}: {data[:200]!r}")
    return Reply(status, stdout, stderr, kind if isinstance(kind, str) else None, _error_at(obj.get("error")))


def _error_at(value: Any) -> Optional[ErrorAt]:
    """The reply's ``error`` object, if it has a readable one (it only
    adds detail: a malformed one is left out rather than failing)."""
    if not isinstance(value, dict) or not isinstance(value.get("command"), str):
        return None

    def field(name: str, kind: type) -> Any:
        v = value.get(name)
        return v if isinstance(v, kind) and not isinstance(v, bool) else None

    return ErrorAt(value["command"], field("index", int), field("column", int), field("found", str))
