"""Against a real daemon (root and the binary needed; skipped otherwise, or
failed with DUMMYNET_REQUIRE=1 as in CI). Traffic stays inside the
namespaces the shell makes and the veth to this host that it makes; pings
are bounded in count and time."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from typing import Callable, Iterator, List, Tuple

import pytest

import dummynet

ShellFactory = Callable[..., dummynet.Shell]


def min_rtt_ms(sh: dummynet.Shell, count: int = 5) -> Tuple[float, float]:
    """Pings the shell's peer from inside; (min, max) RTT in ms."""
    done = sh.run(["ping", "-n", "-c", str(count), "-i", "0.2", "-w", "15", sh.peer], timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"= ([\d.]+)/([\d.]+)/([\d.]+)/", done.stdout)
    assert found, done.stdout
    return float(found.group(1)), float(found.group(3))


def rule_bodies(shown: str) -> List[Tuple[str, str]]:
    """`ipfw show`'s rules without their counters (which traffic such as
    IPv6's router solicitations moves on its own)."""
    return [(f[0], f[3]) for f in (line.split(None, 3) for line in shown.splitlines()) if len(f) == 4]


@pytest.fixture(scope="module")
def need_ping() -> None:
    if subprocess.run(["sh", "-c", "command -v ping && command -v nsenter"], capture_output=True).returncode != 0:
        pytest.skip("needs ping and nsenter")


def test_delay_changed_mid_test_shows_in_the_rtt(dummynet_shell: ShellFactory, need_ping: None) -> None:
    sh = dummynet_shell(up="delay 20ms", down="bw 0")
    low, _ = min_rtt_ms(sh)
    # The pipe's delay is a floor; one of five pings came back well below
    # the next delay.
    assert 20.0 <= low < 80.0
    sh.client.pipe(1).modify(delay="80ms")
    low2, _ = min_rtt_ms(sh)
    assert low2 >= 80.0
    assert "80 ms" in sh.client.pipe(1).show_text()


def test_a_bad_command_raises_and_changes_nothing(dummynet_shell: ShellFactory) -> None:
    sh = dummynet_shell(up="bw 10Mbit/s delay 20ms")
    client = sh.client
    pipes, rules = client.run("pipe show").stdout, client.rules_text()
    with pytest.raises(dummynet.CommandSyntaxError) as raised:
        client.pipe(1).modify(delay="soon")
    assert raised.value.status == 64 and "soon" in raised.value.reply.stderr
    with pytest.raises(dummynet.NotFound):
        client.pipe(77).delete()
    with pytest.raises(dummynet.NotFound):
        client.delete_rule(4242)
    # Refused before it is sent: it would have added a rule.
    with pytest.raises(ValueError):
        client.pipe(1).modify(delay="10ms add 1 deny ip from any to any")
    with pytest.raises(ValueError):
        client.run("pipe 1 modify delay 10ms\nadd 1 deny ip from any to any")
    assert client.run("pipe show").stdout == pipes
    assert rule_bodies(client.rules_text()) == rule_bodies(rules)
    assert [n for n, _ in rule_bodies(rules)] == ["00100", "00200", "65000", "65535"]


def test_stats_books_balance(dummynet_shell: ShellFactory, need_ping: None) -> None:
    sh = dummynet_shell(up="delay 5ms plr 0.5", down="bw 0", seed=7)
    sh.run(["ping", "-n", "-c", "20", "-i", "0.1", "-w", "15", sh.peer], timeout=30)
    stats = sh.client.stats()
    t = stats["totals"]
    assert t["arrived"] >= 20
    assert t["arrived"] == t["delivered"] + t["dropped"] + t["inside"]
    assert t["dropped"] == sum(stats["drops_by_reason"].values())
    # plr 0.5 over at least twenty echo requests: some were lost, by plr.
    assert t["dropped"] > 0 and stats["drops_by_reason"]["plr"] == t["dropped"]
    # zero: rule 100's counters (twenty echo requests at least) start again
    # (from nothing, or from a stray router solicitation since).
    counted = lambda: int(sh.client.rules_text().split("\n")[0].split()[1])  # noqa: E731
    assert counted() >= 20
    sh.client.zero()
    assert counted() < 20


def test_batches_are_all_or_nothing(dummynet_shell: ShellFactory) -> None:
    client = dummynet_shell(up="delay 20ms").client
    before = client.pipe(1).show_text()
    try:
        with pytest.raises(dummynet.CommandError) as raised:
            client.apply(["pipe 1 modify delay 30ms", "pipe 1 modify delay never"])
    except dummynet.Unavailable:
        pytest.skip("this daemon does not take batches")
    if isinstance(raised.value, dummynet.Unavailable):
        pytest.skip("this daemon does not take batches")
    # The pipe's configuration (its first line) is as before; the lines
    # below it count live traffic, which a stray packet of the shell's own
    # (an IPv6 router solicitation, say) may change meanwhile.
    after = client.pipe(1).show_text()
    assert after.splitlines()[0] == before.splitlines()[0], (before, after)
    assert "20 ms" in after and "30 ms" not in after, after
    assert isinstance(raised.value, dummynet.CommandSyntaxError)
    assert raised.value.error is not None and raised.value.error.index == 1
    client.apply(["pipe 1 modify delay 30ms", "pipe 2 modify delay 10ms"])
    assert "30 ms" in client.pipe(1).show_text() and "10 ms" in client.pipe(2).show_text()


def test_show_as_json(dummynet_shell: ShellFactory) -> None:
    client = dummynet_shell(up="bw 10Mbit/s delay 20ms").client
    try:
        shown = client.pipe(1).show()
    except dummynet.Unavailable:
        pytest.skip("this daemon answers show in text only")
    link = shown["pipes"][0]["link"]
    assert shown["pipes"][0]["number"] == 1
    assert (link["bandwidth_bps"], link["delay_ns"]) == (10_000_000, 20_000_000)


def test_the_shell_is_gone_after_the_block(dummynet_bin: str) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with dummynet.shell(up="delay 1ms", binary=dummynet_bin) as sh:
        socket, pid = sh.client.socket, sh.pid
        assert os.path.exists(f"/proc/{pid}")
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    assert not os.path.exists(socket)
    assert not os.path.exists(f"/proc/{pid}")
    # Also when the block raises.
    with pytest.raises(RuntimeError):
        with dummynet.shell(up="delay 1ms", binary=dummynet_bin) as sh:
            pid = sh.pid
            raise RuntimeError("the test failed")
    assert not os.path.exists(f"/proc/{pid}")


def test_a_shell_that_cannot_start_says_why(dummynet_shell: ShellFactory) -> None:
    with pytest.raises(dummynet.DaemonError) as raised:
        dummynet_shell(preset="no-such-preset")
    assert "no-such-preset" in raised.value.stderr
    assert "no-such-preset" in str(raised.value)


@pytest.fixture
def veth_netns(dummynet_bin: str) -> Iterator[str]:
    """A namespace of our own with a veth pair `va`/`vb` in it, removed
    after the test."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    name = f"dnpy-{uuid.uuid4().hex[:10]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        for cmd in (["ip", "link", "add", "name", "va", "type", "veth", "peer", "name", "vb"], ["ip", "link", "set", "va", "up"], ["ip", "link", "set", "vb", "up"]):
            subprocess.run(["ip", "netns", "exec", name, *cmd], check=True)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_a_bridge_daemon(veth_netns: str, dummynet_bin: str) -> None:
    with dummynet.daemon(bridge=("va", "vb"), netns=veth_netns, binary=dummynet_bin) as d:
        d.client.pipe(1).config(bw=10_000_000, delay="5ms")
        d.client.add_rule("100 pipe 1 ip from any to any in")
        shown = d.client.pipe(1).show_text()
        assert "10.000 Mbit/s" in shown and "5 ms" in shown
        assert "bridge va <-> vb" in d.client.stats()["backends"]
        pid = d.pid
    # Stopped and waited for (reaped) on the way out.
    assert not os.path.exists(f"/proc/{pid}")


def test_a_daemon_that_cannot_start_says_why(veth_netns: str, dummynet_bin: str) -> None:
    with pytest.raises(dummynet.DaemonError) as raised:
        with dummynet.daemon(bridge=("va", "nosuchif0"), netns=veth_netns, binary=dummynet_bin):
            pass
    assert "nosuchif0" in raised.value.stderr
