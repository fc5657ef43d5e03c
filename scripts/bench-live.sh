#!/usr/bin/env bash
# Live benchmark of dummynet's bridge mode against the kernel's own bridge on
# the same topology, in namespaces this script creates and always removes:
#
#   ns A (10.203.0.1) --veth-- ns M (bridge) --veth-- ns B (10.203.0.2)
#
# In M, either a Linux bridge (the reference) or `dummynet run --bridge`.
# Measures, each with the kernel reference first:
#   - 64-byte frames/s through an unlimited pipe, twice: from `dummynet flood`
#     (raw frames to a MAC nobody owns, so neither the generator nor the sink
#     is the bottleneck) and from iperf3 -u -l 18 (a real UDP sender and
#     receiver, which on 2 vCPUs limit the rate themselves);
#   - TCP throughput through an unlimited pipe, and through a 10 Gbit/s pipe
#     with 10 ms each way (iperf3, 5 s);
#   - CPU time of the dummynet process per packet;
#   - the delay error at 10 ms each way: the data plane's own release
#     lateness (p50/p99/max, from `dummynet stats`) under TCP and idle, and
#     ping's RTT minus 20 ms next to the same path's RTT without delay;
#     and, first, the machine's own floor under that lateness (`dummynet
#     bench --clock`: how often a spinning real-time thread loses its CPU,
#     and how late the data plane's wait wakes with no packets at all).
#   - the same through the AF_XDP bridge (`run --bridge ... --xdp`, which
#     on these veths attaches in generic XDP, with TCP and super-packets
#     through an AF_PACKET bridge beside it), and then ROUNDS (default 2)
#     rounds of 64-byte flood and TCP alternating the kernel's bridge, the
#     AF_PACKET bridge, the AF_XDP one and the AF_XDP one in driver XDP
#     (`--xdp-attach driver`, whose veth peers segment TCP), so that what
#     else the machine does falls on all alike. Each TCP line also gives
#     the sender's average frame size (above an MTU: GSO super-packets).
# Needs root, ip, iperf3, ping. Usage: [ROUNDS=n] [ONLY_INTERLEAVED=1]
# scripts/bench-live.sh [path/to/dummynet] (ONLY_INTERLEAVED: the last part only)
set -euo pipefail

DN=${1:-target/release/dummynet}
[ -x "$DN" ] || { echo "build first: cargo build --release -p dummynet" >&2; exit 1; }
DN=$(realpath "$DN")
TAG=dnb$$
A=$TAG-a M=$TAG-m B=$TAG-b
SOCK=/tmp/$TAG.sock
DNPID=

cleanup() {
    [ -n "$DNPID" ] && kill -INT "$DNPID" 2>/dev/null && wait "$DNPID" 2>/dev/null || true
    # The iperf3 daemon outlives its namespace unless it is stopped.
    [ -f /tmp/$TAG.iperf ] && kill "$(cat /tmp/$TAG.iperf)" 2>/dev/null || true
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

ip netns exec $B iperf3 -s -D -p 5201 --pidfile /tmp/$TAG.iperf >/dev/null
sleep 0.3

flood_pps() { # prints frames/s arriving at B from `dummynet flood` in A over 4 s
    local r0 r1
    r0=$(ip netns exec $B cat /sys/class/net/vb/statistics/rx_packets)
    # Real-time, so that other work on the machine does not slow the
    # generator (the data plane is real-time too).
    $RT ip netns exec $A "$DN" flood va --seconds 4 --size 64 >/tmp/$TAG.flood 2>&1 || true
    r1=$(ip netns exec $B cat /sys/class/net/vb/statistics/rx_packets)
    echo "$(( (r1 - r0) / 4 )) (offered $(sed -nE 's/.*: ([0-9]+) frames\/s.*/\1/p' /tmp/$TAG.flood))"
}
udp_pps() { # prints received packets/s of 64-byte frames over 5 s
    ip netns exec $A iperf3 -c 10.203.0.2 -p 5201 -u -l 18 -b 0 -t 5 -J >/tmp/$TAG.udp.json 2>/dev/null || true
    python3 - /tmp/$TAG.udp.json <<'EOF'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    s = j["end"]["sum"]
    print(int((s["packets"] - s["lost_packets"]) / s["seconds"]))
except Exception as e:
    print("n/a")
EOF
}
tcp_gbps() {
    ip netns exec $A iperf3 -c 10.203.0.2 -p 5201 -t 5 -J >/tmp/$TAG.tcp.json 2>/dev/null || true
    python3 -c "import json,sys
try: print('%.2f' % (json.load(open('/tmp/$TAG.tcp.json'))['end']['sum_received']['bits_per_second']/1e9))
except Exception: print('n/a')"
}
ping_rtt() { # $1 = RTT the pipes add, in ms; $2 = interval (default 0.01 s).
    # Prints ping's avg and mdev (microsecond resolution; per-reply times are
    # printed to 0.1 ms only) minus that, over 1000 pings after 200 to warm up.
    local i=${2:-0.01}
    ip netns exec $A ping -i $i -c 200 -q -W 1 10.203.0.2 >/dev/null 2>&1 || true
    ip netns exec $A ping -i $i -c 1000 -q -W 1 10.203.0.2 2>/dev/null | python3 -c "
import sys, re
m = re.search(r'= ([0-9.]+)/([0-9.]+)/([0-9.]+)/([0-9.]+) ms', sys.stdin.read())
if not m: print('n/a'); sys.exit()
mn, avg, mx, mdev = (float(x) * 1000 for x in m.groups())
base = $1 * 1000
print('avg %+.0f us, mdev %.0f us, min %+.0f us, max %+.0f us' % (avg - base, mdev, mn - base, mx - base))"
}
RT=$(command -v chrt >/dev/null && echo "chrt -f 5" || true)
cpu_ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }

kernel_bridge_up() {
    ip -n $M link add br0 type bridge
    ip -n $M link set m-a master br0; ip -n $M link set m-b master br0; ip -n $M link set br0 up
    sleep 1
}
start_dn() { # $1 = config text
    printf '%b' "$1" >/tmp/$TAG.conf
    ip netns exec $M "$DN" run --bridge m-a m-b ${DN_OPTS:-} --config /tmp/$TAG.conf --socket "$SOCK" >/tmp/$TAG.log 2>&1 &
    DNPID=$!
    for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
    sleep 0.5
}
stop_dn() { kill -INT "$DNPID"; wait "$DNPID" || true; DNPID=; }
UNLIMITED='pipe 1 config bw 0\nadd 100 pipe 1 ip from any to any in\nadd 65000 allow ip from any to any\n'
tx_frame_avg() { # run "$@", then print A's average frame size over it
    local p0 b0
    p0=$(ip netns exec $A cat /sys/class/net/va/statistics/tx_packets)
    b0=$(ip netns exec $A cat /sys/class/net/va/statistics/tx_bytes)
    "$@" >/tmp/$TAG.out
    echo "$(cat /tmp/$TAG.out) Gbit/s, A's frames $(( ($(ip netns exec $A cat /sys/class/net/va/statistics/tx_bytes) - b0) / ($(ip netns exec $A cat /sys/class/net/va/statistics/tx_packets) - p0 + 1) )) B avg"
}

if [ -z "${ONLY_INTERLEAVED:-}" ]; then
echo "== this machine's clock floor (no packets)"
"$DN" bench --clock 6
echo "== kernel bridge (reference)"
kernel_bridge_up
echo "flood 64B frames/s: $(flood_pps)"
echo "udp 64B frames/s: $(udp_pps)"
echo "tcp Gbit/s:       $(tcp_gbps)"
ip -n $M link del br0

echo "== dummynet bridge, unlimited pipe"
start_dn 'pipe 1 config bw 0\nadd 100 pipe 1 ip from any to any in\nadd 65000 allow ip from any to any\n'
hz=$(getconf CLK_TCK)
cpu_per_frame() { # $1 $2 = cpu ticks before/after, $3 $4 = engine arrivals before/after (two passes a frame)
    python3 -c "n=($4-$3)//2; print('cpu per frame:    %.0f ns (%d frames, %.2f s of CPU)' % (($2-$1)/$hz*1e9/max(n,1), n, ($2-$1)/$hz))"
}
t0=$(cpu_ticks $DNPID); n0=$(DUMMYNET_SOCKET=$SOCK "$DN" stats | awk '/^packets:/{print $2}')
echo "flood 64B frames/s: $(flood_pps)"
t1=$(cpu_ticks $DNPID); n1=$(DUMMYNET_SOCKET=$SOCK "$DN" stats | awk '/^packets:/{print $2}')
cpu_per_frame $t0 $t1 $n0 $n1
echo "udp 64B frames/s: $(udp_pps)"
t2=$(cpu_ticks $DNPID); n2=$(DUMMYNET_SOCKET=$SOCK "$DN" stats | awk '/^packets:/{print $2}')
cpu_per_frame $t1 $t2 $n1 $n2
echo "tcp Gbit/s:       $(tcp_gbps)"
echo "ping RTT, pipes without delay (the path itself): $(ping_rtt 0)"
stop_dn

echo "== dummynet bridge, 10 Gbit/s and 10 ms each way"
start_dn 'sysctl net.inet.ip.dummynet.pipe_byte_limit=33554432\npipe 1 config bw 10Gbit/s delay 10ms queue 20000KBytes\npipe 2 config bw 10Gbit/s delay 10ms queue 20000KBytes\nadd 100 pipe 1 ip from any to any in recv m-a\nadd 200 pipe 2 ip from any to any in recv m-b\nadd 65000 allow ip from any to any\n'
echo "tcp Gbit/s:       $(tcp_gbps)"
DUMMYNET_SOCKET=$SOCK "$DN" stats | grep lateness
stop_dn
echo "== dummynet bridge, 10 ms each way, ping alone"
start_dn 'pipe 1 config delay 10ms\npipe 2 config delay 10ms\nadd 100 pipe 1 ip from any to any in recv m-a\nadd 200 pipe 2 ip from any to any in recv m-b\nadd 65000 allow ip from any to any\n'
echo "ping RTT - 20 ms: $(ping_rtt 20)"
DUMMYNET_SOCKET=$SOCK "$DN" stats | grep lateness
stop_dn
# Every 10 ms, a reply and the next request fall due together: the second
# waits while the kernel runs the first through the receiver's stack, inline
# on the data plane's thread (a veth has no device queue). 13.7 ms apart,
# nothing is due at once, and the lateness is the timer's alone.
echo "== dummynet bridge, 10 ms each way, ping every 13.7 ms"
start_dn 'pipe 1 config delay 10ms\npipe 2 config delay 10ms\nadd 100 pipe 1 ip from any to any in recv m-a\nadd 200 pipe 2 ip from any to any in recv m-b\nadd 65000 allow ip from any to any\n'
echo "ping RTT - 20 ms: $(ping_rtt 20 0.0137)"
DUMMYNET_SOCKET=$SOCK "$DN" stats | grep lateness
stop_dn

echo "== dummynet AF_XDP bridge (--xdp), unlimited pipe"
DN_OPTS=--xdp start_dn "$UNLIMITED"
grep -E 'AF_XDP|--xdp' /tmp/$TAG.log || true
t0=$(cpu_ticks $DNPID); n0=$(DUMMYNET_SOCKET=$SOCK "$DN" stats | awk '/^packets:/{print $2}')
echo "flood 64B frames/s: $(flood_pps)"
t1=$(cpu_ticks $DNPID); n1=$(DUMMYNET_SOCKET=$SOCK "$DN" stats | awk '/^packets:/{print $2}')
cpu_per_frame $t0 $t1 $n0 $n1
echo "udp 64B frames/s: $(udp_pps)"
t2=$(cpu_ticks $DNPID); n2=$(DUMMYNET_SOCKET=$SOCK "$DN" stats | awk '/^packets:/{print $2}')
cpu_per_frame $t1 $t2 $n1 $n2
echo "tcp Gbit/s:       $(tcp_gbps)"
echo "ping RTT, pipes without delay (the path itself): $(ping_rtt 0)"
DUMMYNET_SOCKET=$SOCK "$DN" stats | grep -E 'umem|fill_ring|tx_failed|gso_frames' | tr '\n' ' '; echo
stop_dn
fi

echo "== interleaved: kernel bridge, AF_PACKET bridge, AF_XDP bridge (generic XDP on veth), AF_XDP in driver XDP (unlimited pipe)"
for r in $(seq "${ROUNDS:-2}"); do
    kernel_bridge_up
    echo "round $r kernel:     flood 64B $(flood_pps) frames/s, tcp $(tx_frame_avg tcp_gbps)"
    ip -n $M link del br0
    DN_OPTS= start_dn "$UNLIMITED"
    echo "round $r af_packet:  flood 64B $(flood_pps) frames/s, tcp $(tx_frame_avg tcp_gbps)"
    stop_dn
    DN_OPTS=--xdp start_dn "$UNLIMITED"
    echo "round $r af_xdp:     flood 64B $(flood_pps) frames/s, tcp $(tx_frame_avg tcp_gbps)"
    stop_dn
    DN_OPTS="--xdp --xdp-attach driver" start_dn "$UNLIMITED"
    echo "round $r af_xdp drv: flood 64B $(flood_pps) frames/s, tcp $(tx_frame_avg tcp_gbps)"
    stop_dn
done
