#!/usr/bin/env bash
# Live benchmark of `dummynet run --bridge --workers N`: 64-byte frames/s
# through the AF_PACKET bridge with 1 and 2 data-plane workers, one pipe
# and two, in namespaces this script creates and always removes:
#
#   ns A (10.203.0.1) --veth-- ns M (dummynet run --bridge) --veth-- ns B
#
# The load is `dummynet flood` in A (real-time, 16 UDP flows, source ports
# 1024-1039, to a MAC nobody owns), counted as it arrives at B's veth. One
# pipe: every frame to pipe 1. Two pipes: ports 1024-1031 to pipe 1 and the
# rest to pipe 2 (pipe N is on worker N mod workers, so with two workers
# each owns one). Each line also gives the daemon's CPU per frame and what
# crossed between workers. ROUNDS (default 3) rounds alternate the four
# set-ups, so that what else the machine does falls on all alike.
#
# On a 2-core machine the generator takes a core of its own: read the
# two-worker lines as what a second worker costs and brings when it has to
# share, not as its scaling (README "Workers" works that out from the
# per-frame costs).
# The generator runs at SCHED_FIFO FLOOD_PRIO (default 5, below the data
# plane's 10); DN_OPTS adds options to `run` (e.g. --precision timer).
# Needs root, ip. Usage: [ROUNDS=n] [SECONDS_EACH=s] [FLOOD_PRIO=p] [DN_OPTS=...] scripts/bench-workers.sh [path/to/dummynet]
set -euo pipefail

DN=${1:-target/release/dummynet}
[ -x "$DN" ] || { echo "build first: cargo build --release -p dummynet" >&2; exit 1; }
DN=$(realpath "$DN")
ROUNDS=${ROUNDS:-3}
SECS=${SECONDS_EACH:-4}
TAG=dnw$$
A=$TAG-a M=$TAG-m B=$TAG-b
SOCK=/tmp/$TAG.sock
DNPID=

cleanup() {
    [ -n "$DNPID" ] && kill -INT "$DNPID" 2>/dev/null && wait "$DNPID" 2>/dev/null || true
    for ns in $A $M $B; do ip netns del "$ns" 2>/dev/null || true; done
    rm -f "$SOCK" /tmp/$TAG.*
}
trap cleanup EXIT INT TERM

for ns in $A $M $B; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip link add va netns $A type veth peer name m-a netns $M
ip link add vb netns $B type veth peer name m-b netns $M
ip -n $A addr add 10.203.0.1/24 dev va
ip -n $B addr add 10.203.0.2/24 dev vb
for l in "$A va" "$M m-a" "$M m-b" "$B vb"; do set -- $l; ip -n "$1" link set "$2" up; done

RT=$(command -v chrt >/dev/null && echo "chrt -f ${FLOOD_PRIO:-5}" || true)
hz=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }

ONE='pipe 1 config bw 0\nadd 100 pipe 1 ip from any to any in recv m-a\nadd 65000 allow ip from any to any\n'
TWO='pipe 1 config bw 0\npipe 2 config bw 0\nadd 100 pipe 1 udp from any 1024-1031 to any in recv m-a\nadd 110 pipe 2 ip from any to any in recv m-a\nadd 65000 allow ip from any to any\n'

start_dn() { # $1 = workers, $2 = config text
    printf '%b' "$2" >/tmp/$TAG.conf
    ip netns exec $M "$DN" run --bridge m-a m-b --workers "$1" ${DN_OPTS:-} \
        --config /tmp/$TAG.conf --socket "$SOCK" >/tmp/$TAG.log 2>&1 &
    DNPID=$!
    for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
    sleep 0.5
}
stop_dn() { kill -INT "$DNPID"; wait "$DNPID" || true; DNPID=; }

one_run() { # $1 = workers, $2 = pipes: prints one line
    local conf=$ONE
    [ "$2" = 2 ] && conf=$TWO
    start_dn "$1" "$conf"
    local r0 r1 t0 t1 n0 n1
    r0=$(ip netns exec $B cat /sys/class/net/vb/statistics/rx_packets)
    t0=$(cpu_ticks $DNPID)
    n0=$(DUMMYNET_SOCKET=$SOCK "$DN" stats | awk '/^packets:/{print $2}')
    $RT ip netns exec $A "$DN" flood va --seconds "$SECS" --size 64 --flows 16 >/tmp/$TAG.flood 2>&1 || true
    r1=$(ip netns exec $B cat /sys/class/net/vb/statistics/rx_packets)
    t1=$(cpu_ticks $DNPID)
    DUMMYNET_SOCKET=$SOCK "$DN" stats >/tmp/$TAG.stats
    n1=$(awk '/^packets:/{print $2}' /tmp/$TAG.stats)
    local offered
    offered=$(sed -nE 's/.*: ([0-9]+) frames\/s.*/\1/p' /tmp/$TAG.flood)
    python3 - "$1" "$2" "$r0" "$r1" "$t0" "$t1" "$n0" "$n1" "$offered" "$SECS" "$hz" /tmp/$TAG.stats <<'PY'
import sys, re
w, p, r0, r1, t0, t1, n0, n1, offered, secs, hz, stats = sys.argv[1:]
fps = (int(r1) - int(r0)) / float(secs)
# Two passes of the rules a frame (in, then out).
frames = max((int(n1) - int(n0)) // 2, 1)
cpu = (int(t1) - int(t0)) / int(hz)
text = open(stats).read()
drops = re.search(r'^drops: (.*)$', text, re.M)
print(f"workers {w} pipes {p}: {fps:10.0f} frames/s at B (offered {offered}), "
      f"cpu {cpu*1e9/frames:5.0f} ns/frame ({cpu:.2f} s), drops: {drops.group(1) if drops else 'none'}")
PY
    stop_dn
}

echo "== 64-byte flood, 16 flows, ${SECS} s each, $ROUNDS rounds (load before: $(cut -d' ' -f1-3 /proc/loadavg))"
for r in $(seq "$ROUNDS"); do
    echo "-- round $r"
    for p in 1 2; do
        for w in 1 2; do one_run "$w" "$p"; done
    done
done
