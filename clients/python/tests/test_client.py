"""The client without a daemon: how commands are built (and injection
refused), and how replies map to exceptions, against a stand-in socket that
records what it is sent and answers as told."""

from __future__ import annotations

import datetime
import json
import os
import socket
import tempfile
import threading
from typing import Any, Dict, Iterator, List

import pytest

import dummynet
from dummynet.client import command_tokens, option_tokens, options_tokens


class FakeDaemon:
    """A Unix socket that answers each connection with the next of
    ``replies`` and keeps the requests it read."""

    def __init__(self, path: str, replies: List[Dict[str, Any]]):
        self.requests: List[Dict[str, Any]] = []
        self.replies = list(replies)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(path)
        self.listener.listen(8)
        self.listener.settimeout(10)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.replies:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            with conn:
                data = b""
                while not data.endswith(b"\n"):
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    data += chunk
                self.requests.append(json.loads(data))
                conn.sendall((json.dumps(self.replies.pop(0)) + "\n").encode())

    def close(self) -> None:
        self.listener.close()
        self.thread.join(5)


@pytest.fixture
def fake() -> Iterator[Any]:
    with tempfile.TemporaryDirectory() as d:
        made: List[FakeDaemon] = []

        def start(*replies: Dict[str, Any]) -> "tuple[dummynet.Client, FakeDaemon]":
            daemon = FakeDaemon(os.path.join(d, f"fake{len(made)}.sock"), list(replies))
            made.append(daemon)
            return dummynet.Client(daemon.listener.getsockname(), timeout=10), daemon

        yield start
        for daemon in made:
            daemon.close()


OK = {"status": 0, "stdout": "", "stderr": ""}


def test_options_become_tokens_in_order() -> None:
    assert options_tokens({"bw": "10Mbit/s", "delay": "20ms", "plr": 0.01}) == [
        "bw", "10Mbit/s", "delay", "20ms", "plr", "0.01",
    ]
    assert option_tokens("bw", 1_500_000) == ["bw", "1500000bit/s"]
    assert option_tokens("delay", datetime.timedelta(milliseconds=30)) == ["delay", "30ms"]
    assert option_tokens("delay", datetime.timedelta(microseconds=250)) == ["delay", "250us"]
    assert option_tokens("queue", 50) == ["queue", "50"]
    assert option_tokens("plr", 0.00001) == ["plr", "0.00001"]
    assert option_tokens("noerror", True) == ["noerror"]
    assert option_tokens("noerror", False) == []
    assert option_tokens("mask", ("dst-ip", "0xffffff00")) == ["mask", "dst-ip", "0xffffff00"]


def test_values_that_would_inject_tokens_are_refused() -> None:
    for bad in ["10ms add 1 deny ip from any to any", "10ms\nadd 1 deny", "20ms\t", ""]:
        with pytest.raises(ValueError):
            option_tokens("delay", bad)
    with pytest.raises(ValueError):
        option_tokens("mask", ("dst-ip 0xff", "x"))
    with pytest.raises(ValueError, match="several lines"):
        command_tokens("pipe 1 config bw 1Mbit/s\nadd 1 deny ip from any to any")
    with pytest.raises(ValueError):
        command_tokens(["pipe", "1 show"])
    with pytest.raises(ValueError):
        command_tokens("   ")


def test_bare_numbers_for_times_are_refused() -> None:
    # 0.03 would be 0.03 ms to the daemon: say so rather than guess.
    with pytest.raises(TypeError, match="timedelta"):
        option_tokens("delay", 0.03)
    with pytest.raises(ValueError):
        option_tokens("bw", -1)
    with pytest.raises(TypeError):
        option_tokens("bw", object())  # type: ignore[arg-type]


def test_object_methods_send_argv(fake: Any) -> None:
    client, daemon = fake(OK, OK, OK, {"status": 0, "stdout": "00001: ...\n", "stderr": ""}, OK, OK)
    client.pipe(1).config(bw="10Mbit/s", delay="20ms", plr=0.01)
    client.queue(3).modify(weight=5)
    client.sched(2).delete()
    assert client.pipe(1).show_text() == "00001: ...\n"
    client.add_rule("100 pipe 1 ip from any to any in")
    client.zero()
    argvs = [r["argv"] for r in daemon.requests]
    assert argvs == [
        ["pipe", "1", "config", "bw", "10Mbit/s", "delay", "20ms", "plr", "0.01"],
        ["queue", "3", "modify", "weight", "5"],
        ["sched", "2", "delete"],
        ["pipe", "1", "show"],
        ["add", "100", "pipe", "1", "ip", "from", "any", "to", "any", "in"],
        ["zero"],
    ]
    assert all(r["cwd"] == os.getcwd() for r in daemon.requests)
    with pytest.raises(ValueError):
        client.pipe(0)
    with pytest.raises(ValueError):
        client.pipe(1).modify()


@pytest.mark.parametrize(
    "reply,expected",
    [
        ({"status": 64, "kind": "syntax"}, dummynet.CommandSyntaxError),
        ({"status": 65, "kind": "invalid"}, dummynet.InvalidCommand),
        ({"status": 65, "kind": "not_found"}, dummynet.NotFound),
        ({"status": 69, "kind": "unavailable"}, dummynet.Unavailable),
        ({"status": 69, "kind": "busy"}, dummynet.Busy),
        ({"status": 69, "kind": "stopped"}, dummynet.Stopped),
        ({"status": 69, "kind": "denied"}, dummynet.Denied),
        ({"status": 65, "kind": "conflict"}, dummynet.Conflict),
        ({"status": 69, "kind": "timeout"}, dummynet.Timeout),
        ({"status": 75, "kind": "pending"}, dummynet.Pending),
        ({"status": 70, "kind": "internal"}, dummynet.CommandError),
        # A kind this package does not know yet: by status.
        ({"status": 65, "kind": "something_new"}, dummynet.InvalidCommand),
        ({"status": 3, "kind": "something_new"}, dummynet.CommandError),
        # Daemons without kinds: by status, and by what they say.
        ({"status": 64}, dummynet.CommandSyntaxError),
        ({"status": 65, "stderr": "ipfw: pipe 9 does not exist\n"}, dummynet.NotFound),
        ({"status": 65, "stderr": "ipfw: no\n"}, dummynet.InvalidCommand),
        ({"status": 69, "stderr": "dummynet: busy: 32 clients are being served; try again\n"}, dummynet.Busy),
        ({"status": 69, "stderr": "dummynet: the data plane did not answer within 10 s; ...\n"}, dummynet.Timeout),
        ({"status": 75}, dummynet.Pending),
    ],
)
def test_refusals_raise_by_kind(fake: Any, reply: Dict[str, Any], expected: type) -> None:
    answer = {"stdout": "", "stderr": "ipfw: refused\n", **reply}
    client, _ = fake(answer)
    with pytest.raises(expected) as raised:
        client.run("pipe 9 delete")
    assert type(raised.value) is expected
    assert isinstance(raised.value, dummynet.CommandError)
    assert raised.value.status == reply["status"]
    assert raised.value.kind == reply.get("kind")
    assert raised.value.reply.stderr == answer["stderr"]
    assert "pipe 9 delete" in str(raised.value)


def test_batches_and_json(fake: Any) -> None:
    doc = {"pipes": [{"number": 1}]}
    client, daemon = fake(OK, {"status": 0, "stdout": json.dumps(doc), "stderr": ""}, {"status": 0, "stdout": "00001: text\n", "stderr": ""})
    client.apply(["pipe 1 config bw 1Mbit/s", ["pipe", "2", "config", "delay", "5ms"]])
    assert daemon.requests[0]["commands"] == [["pipe", "1", "config", "bw", "1Mbit/s"], ["pipe", "2", "config", "delay", "5ms"]]
    assert client.pipe(1).show() == doc
    assert daemon.requests[1]["json"] is True and daemon.requests[1]["argv"] == ["pipe", "1", "show"]
    # A daemon that answers in text only is told apart from a broken one.
    with pytest.raises(dummynet.Unavailable, match="text only"):
        client.pipe(1).show()


def test_a_refused_batch_says_which_command(fake: Any) -> None:
    refused = {
        "status": 64, "stdout": "", "kind": "syntax",
        "stderr": "ipfw: expected a delay such as 10ms, found `never`\n",
        "error": {"index": 1, "command": "pipe 1 modify delay never", "column": 21, "found": "never"},
    }
    client, _ = fake(refused)
    with pytest.raises(dummynet.CommandSyntaxError) as raised:
        client.apply(["pipe 1 modify delay 30ms", "pipe 1 modify delay never"])
    assert raised.value.error == dummynet.ErrorAt("pipe 1 modify delay never", 1, 21, "never")
    assert "command 2 of the batch" in str(raised.value)


def test_a_daemon_without_batches_applies_nothing_and_says_so(fake: Any) -> None:
    old = {"status": 64, "stdout": "", "stderr": "ipfw: expected a command (add, ...), found nothing (column 1)\n"}
    client, _ = fake(old)
    with pytest.raises(dummynet.Unavailable, match="batches"):
        client.apply(["pipe 1 config bw 1Mbit/s"])


def test_stats_is_parsed(fake: Any) -> None:
    stats = {"totals": {"arrived": 3, "delivered": 2, "dropped": 1, "inside": 0}}
    client, daemon = fake({"status": 0, "stdout": json.dumps(stats) + "\n", "stderr": ""})
    assert client.stats() == stats
    assert daemon.requests == [{"stats": True, "json": True}]


def test_no_daemon_and_bad_answers(fake: Any, tmp_path: Any) -> None:
    with pytest.raises(dummynet.DaemonNotRunning):
        dummynet.Client(str(tmp_path / "nobody.sock")).run("show")
    client, _ = fake({"status": "zero"})
    with pytest.raises(dummynet.ProtocolError):
        client.run("show")
