#!/usr/bin/env bash
# dummynet's shell side by side with its strongest peer, rattan's
# `rattan link` shell, on the same links, in interleaved rounds:
#
#   - ping every 10 ms through 10 ms each way: RTT avg / mdev / max, and the
#     emulator's CPU meanwhile;
#   - TCP (iperf3, 10 s) through 50 Mbit/s + 10 ms each way: goodput and the
#     emulator's CPU;
#   - TCP with no limits: goodput and CPU;
#   - UDP, 64-byte datagrams as fast as iperf3 sends them for 5 s: what the
#     sender manages beside the emulator (a spinning emulator takes its core).
#
# "Emulator CPU" is the user + system time of the emulator's process (all
# its threads: the shell command's parent) over the measurement; the
# kernel's softirq threads' time is shown beside it, since work the
# emulator leaves to the kernel lands there.
#
# Everything runs inside a network namespace this script creates and
# removes: both shells put their far end there, and the iperf3 server
# listens only there. Installs rattan with cargo if it is missing.
#
# Each measurement runs dummynet at its default precision, then at
# `--precision max`, then rattan (PEERS picks and orders them; TESTS picks
# the measurements). HOGS=N runs N busy loops beside the traffic (inside
# the shell, for the measurement's length): how each emulator keeps its
# timing on a machine whose cores are all taken, as in a CI job that also
# builds.
#
# Needs root, ip, iperf3, ping, jq, bc. Usage:
#   sudo [TESTS="ping tcp50 tcp udp64"] [PEERS="dummynet dummynet-max rattan"] \
#       [HOGS=N] \
#       scripts/bench-peers.sh [path/to/dummynet] [rounds] [dummynet shell options...]
set -euo pipefail

DN=${1:-target/release/dummynet}
ROUNDS=${2:-3}
shift $(( $# > 2 ? 2 : $# )) || true
DN_OPTS=("$@")
TESTS=${TESTS:-ping tcp50 tcp udp64}
PEERS=${PEERS:-dummynet dummynet-max rattan}
export HOGS=${HOGS:-0}
[ -x "$DN" ] || { echo "build first: cargo build --release -p dummynet" >&2; exit 1; }
DN=$(realpath "$DN")
if ! command -v rattan >/dev/null; then
    echo "installing rattan (cargo install rattan --locked)..." >&2
    cargo install rattan --locked >&2
fi
RATTAN=$(command -v rattan || echo "$HOME/.cargo/bin/rattan")
for tool in iperf3 ping jq ip bc; do
    command -v $tool >/dev/null || { echo "needs $tool" >&2; exit 1; }
done

TAG=dnpeer$$
NS=$TAG
WORK=$(mktemp -d /tmp/$TAG.XXXX)
cleanup() {
    [ -f "$WORK/iperf.pid" ] && kill "$(cat "$WORK/iperf.pid")" 2>/dev/null || true
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

ip netns add "$NS"
ip -n "$NS" link set lo up
ip netns exec "$NS" iperf3 -s -D -p 5299 --pidfile "$WORK/iperf.pid" >/dev/null
sleep 0.3

# The measurement, run inside either shell: $1 names it. The emulator is the
# shell command's parent; the far end is the shell's default gateway.
cat > "$WORK/inner.sh" <<'EOF'
set -u
what=$1
gw=$(ip -4 route | awk '/^default/ {print $3; exit}')
cpu_of() { awk '{print $14 + $15}' "/proc/$1/stat"; }
softirq() { # ticks of every ksoftirqd thread
    local t=0 f
    for f in /proc/[0-9]*/stat; do
        case $(cat "${f%stat}comm" 2>/dev/null) in ksoftirqd/*)
            t=$(( t + $(awk '{print $14 + $15}' "$f" 2>/dev/null || echo 0) ));;
        esac
    done
    echo $t
}
hz=$(getconf CLK_TCK)
sleep 0.5
hogs=()
for _ in $(seq 1 "${HOGS:-0}"); do
    (end=$((SECONDS + 15)); while [ $SECONDS -lt $end ]; do :; done) &
    hogs+=($!)
done
c0=$(cpu_of $PPID); s0=$(softirq); t0=$(date +%s.%N)
case $what in
ping)
    out=$(ping -q -c 500 -i 0.01 "$gw" | awk -F'[/ ]' '/^rtt/ {print $8, $10, $9}')
    extra="rtt_avg_mdev_max=${out// /,}";;
tcp50|tcp)
    gbps=$(iperf3 -c "$gw" -p 5299 -t 10 -J | jq '.end.sum_received.bits_per_second / 1e6')
    extra="goodput_mbps=$gbps";;
udp64)
    pps=$(iperf3 -c "$gw" -p 5299 -u -b 0 -l 64 -t 5 -J |
          jq '.end.sum.packets / .end.sum.seconds')
    extra="sender_pps=$pps";;
esac
c1=$(cpu_of $PPID); s1=$(softirq); t1=$(date +%s.%N)
[ ${#hogs[@]} -gt 0 ] && kill "${hogs[@]}" 2>/dev/null
echo "RESULT $what $extra cpu_s=$(echo "scale=2; ($c1 - $c0) / $hz" | bc) \
softirq_s=$(echo "scale=2; ($s1 - $s0) / $hz" | bc) wall_s=$(echo "$t1 - $t0" | bc)"
EOF

run_dn() { # $1 test, $2 up/down options, $3... more shell options
    local test=$1 link=$2
    shift 2
    ip netns exec "$NS" "$DN" shell "${DN_OPTS[@]}" "$@" --up "$link" --down "$link" -- \
        bash "$WORK/inner.sh" "$test" 2>&1 | grep '^RESULT' || echo "RESULT $test failed"
}
run_rattan() { # $1 test, $2 delay, $3 bandwidth (empty: none)
    local bw=()
    [ -n "$3" ] && bw=(--uplink-bandwidth "$3" --downlink-bandwidth "$3")
    local delay=()
    [ -n "$2" ] && delay=(--uplink-delay "$2" --downlink-delay "$2")
    ip netns exec "$NS" env RUST_LOG=error "$RATTAN" link "${delay[@]}" "${bw[@]}" -- \
        bash "$WORK/inner.sh" "$1" 2>&1 | grep '^RESULT' || echo "RESULT $1 failed"
}

echo "# dummynet: $("$DN" --version 2>/dev/null || echo "$DN") ${DN_OPTS[*]:-(default options)}"
echo "# rattan: $("$RATTAN" --version 2>/dev/null | head -1)"
echo "# $(nproc) CPUs, $(uname -r), $ROUNDS interleaved rounds, HOGS=$HOGS"
for r in $(seq 1 "$ROUNDS"); do
    echo "## round $r"
    for t in "ping|delay 10ms|10ms|" "tcp50|bw 50Mbit/s delay 10ms|10ms|50Mbps" \
             "tcp|bw 0||" "udp64|bw 0||"; do
        IFS='|' read -r test link delay bw <<<"$t"
        [[ " $TESTS " == *" $test "* ]] || continue
        for peer in $PEERS; do
            case $peer in
            dummynet) echo "dummynet     $(run_dn "$test" "$link")";;
            dummynet-max) echo "dummynet-max $(run_dn "$test" "$link" --precision max)";;
            rattan) echo "rattan       $(run_rattan "$test" "$delay" "$bw")";;
            *) echo "unknown peer $peer" >&2; exit 2;;
            esac
        done
    done
done
