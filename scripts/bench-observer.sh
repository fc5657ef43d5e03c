#!/usr/bin/env bash
# What the live per-packet observer costs the data plane: a 64-byte flood
# (`dummynet flood`, 3 s) through `dummynet run --bridge` with a 1 ms pipe,
# once plain and once with --log, --capture-in and --capture-out written to
# files, and once with the HTTP API serving an event stream to a client
# (curl) beside --log (issue 15's "everything on"); for each, the data
# plane's release lateness (p50/p99/max), the frames it forwarded, and what
# the observer could not keep up with. ROUNDS=N repeats the set, interleaved.
# In namespaces this script creates and always removes:
#
#   ns A (10.203.0.1) --veth-- ns M (dummynet) --veth-- ns B (10.203.0.2)
#
# WORKERS="1 2" runs the set with each number of data-plane workers (`run
# --workers N`; default 1), FLOWS=N floods N flows (default 1; the kernel's
# fanout spreads flows, not frames, over the workers).
#
# Needs root, ip and curl. Usage: [RATE=frames/s] [ROUNDS=N] [WORKERS="1 2"] [FLOWS=N]
#   scripts/bench-observer.sh [path/to/dummynet]
# (RATE: the flood's rate; default 0, as fast as it goes.)
set -euo pipefail

DN=${1:-target/release/dummynet}
[ -x "$DN" ] || { echo "build first: cargo build --release -p dummynet" >&2; exit 1; }
DN=$(realpath "$DN")
TAG=dno$$
A=$TAG-a M=$TAG-m B=$TAG-b
SOCK=/tmp/$TAG.sock
OUT=$(mktemp -d /tmp/$TAG.XXXX)
DNPID=
SUBPID=

cleanup() {
    [ -n "$SUBPID" ] && kill "$SUBPID" 2>/dev/null || true
    [ -n "$DNPID" ] && kill -INT "$DNPID" 2>/dev/null && wait "$DNPID" 2>/dev/null || true
    for ns in $A $M $B; do ip netns del "$ns" 2>/dev/null || true; done
    rm -rf "$SOCK" "$OUT"
}
trap cleanup EXIT INT TERM

for ns in $A $M $B; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip link add va netns $A type veth peer name m-a netns $M
ip link add vb netns $B type veth peer name m-b netns $M
ip -n $A addr add 10.203.0.1/24 dev va
ip -n $B addr add 10.203.0.2/24 dev vb
for l in "$A va" "$M m-a" "$M m-b" "$B vb"; do set -- $l; ip -n "$1" link set "$2" up; done
printf 'pipe 1 config delay 1ms\nadd 100 pipe 1 ip from any to any in recv m-a\nadd 65000 allow ip from any to any\n' >"$OUT/dn.conf"
RT=$(command -v chrt >/dev/null && echo "chrt -f 5" || true)

one() { # $1 = label, then extra `run` options
    local label=$1; shift
    ip netns exec $M "$DN" run --bridge m-a m-b --config "$OUT/dn.conf" --socket "$SOCK" --workers "$W" "$@" \
        >"$OUT/daemon.log" 2>&1 &
    DNPID=$!
    for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
    sleep 0.5
    case " $* " in
    *" --http "*) # a client of the event stream, reading everything
        ip netns exec $M curl -sN "http://127.0.0.1:8799/v1/events" >/dev/null 2>&1 &
        SUBPID=$!
        sleep 0.3 ;;
    esac
    $RT ip netns exec $A "$DN" flood va --seconds 3 --size 64 --rate "${RATE:-0}" --flows "${FLOWS:-1}" \
        >"$OUT/flood" 2>&1 || true
    sleep 0.5
    "$DN" stats --json --socket "$SOCK" | python3 -c "
import json, sys
s = json.load(sys.stdin)
l, t, o = s['lateness_ns'], s['totals'], s['observer']
print('w%s %-26s lateness p50 %6.1f us, p99 %7.1f us, max %8.1f us; %d frames in; %s' % (
    '$W', '$label', l['p50'] / 1e3, l['p99'] / 1e3, l['max'] / 1e3, t['arrived'] // 2,
    'no observer' if o is None else '%d records, %d lost %s, %d log lines, %d out of order' % (
        o['records'], o['lost'], o['lost_by_worker'], o['log_lines'], o['out_of_order'])))"
    [ -n "$SUBPID" ] && { kill "$SUBPID" 2>/dev/null || true; SUBPID=; }
    kill -INT "$DNPID"; wait "$DNPID" || true; DNPID=
    echo "  (offered: $(sed -nE 's/.*: ([0-9]+) frames\/s.*/\1/p' "$OUT/flood") frames/s; files: $(du -sh "$OUT" | cut -f1))"
    rm -f "$OUT"/*.jsonl "$OUT"/*.pcap
}

for _ in $(seq "${ROUNDS:-1}"); do
    for W in ${WORKERS:-1}; do
        one "plain"
        one "--log" --log "$OUT/e.jsonl"
        one "--log + captures" --log "$OUT/e.jsonl" --capture-in "$OUT/in.pcap" --capture-out "$OUT/out.pcap"
        one "http + events + --log" --http 127.0.0.1:8799 --log "$OUT/e.jsonl"
        one "plain, again"
    done
done
