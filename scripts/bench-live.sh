#!/usr/bin/env bash
# Live benchmark of dummynet's bridge mode against the kernel's own bridge on
# the same topology, in namespaces this script creates and always removes:
#
#   ns A (10.203.0.1) --veth-- ns M (bridge) --veth-- ns B (10.203.0.2)
#
# In M, either a Linux bridge (the reference) or `dummynet run --bridge`.
# Measures, each with the kernel reference first:
#   - 64-byte frames/s of UDP through an unlimited pipe (iperf3 -u -l 18);
#   - TCP throughput through an unlimited pipe, and through a 10 Gbit/s pipe
#     with 10 ms each way (iperf3, 5 s);
#   - CPU time of the dummynet process per packet;
#   - the delay error of ping at 10 ms each way (RTT - 20 ms: p50/p99/max).
# Needs root, ip, iperf3, ping. Usage: scripts/bench-live.sh [path/to/dummynet]
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
delay_error() { # ping RTT minus 20 ms: p50 / p99 / max in us
    ip netns exec $A ping -i 0.01 -c 500 -q -W 1 10.203.0.2 >/dev/null 2>&1 || true
    ip netns exec $A ping -i 0.01 -c 1000 -W 1 10.203.0.2 2>/dev/null | python3 -c "
import sys, re
v = sorted(float(m.group(1)) * 1000 - 20000 for m in (re.search(r'time=([0-9.]+) ms', l) for l in sys.stdin) if m)
if not v: print('n/a'); sys.exit()
p = lambda q: v[min(len(v) - 1, int(q * (len(v) - 1)))]
print('p50 %.0f us, p99 %.0f us, max %.0f us (%d samples)' % (p(.5), p(.99), v[-1], len(v)))"
}
cpu_ticks() { awk '{print $14 + $15}' /proc/"$1"/stat; }

echo "== kernel bridge (reference)"
ip -n $M link add br0 type bridge
ip -n $M link set m-a master br0; ip -n $M link set m-b master br0; ip -n $M link set br0 up
sleep 1
echo "udp 64B frames/s: $(udp_pps)"
echo "tcp Gbit/s:       $(tcp_gbps)"
ip -n $M link del br0

start_dn() { # $1 = config text
    printf '%b' "$1" >/tmp/$TAG.conf
    ip netns exec $M "$DN" run --bridge m-a m-b --config /tmp/$TAG.conf --socket "$SOCK" >/tmp/$TAG.log 2>&1 &
    DNPID=$!
    for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
    sleep 0.5
}
stop_dn() { kill -INT "$DNPID"; wait "$DNPID" || true; DNPID=; }

echo "== dummynet bridge, unlimited pipe"
start_dn 'pipe 1 config bw 0\nadd 100 pipe 1 ip from any to any in\nadd 65000 allow ip from any to any\n'
t0=$(cpu_ticks $DNPID); n0=$(DUMMYNET_SOCKET=$SOCK "$DN" stats | awk '/^packets:/{print $2}')
echo "udp 64B frames/s: $(udp_pps)"
t1=$(cpu_ticks $DNPID); n1=$(DUMMYNET_SOCKET=$SOCK "$DN" stats | awk '/^packets:/{print $2}')
hz=$(getconf CLK_TCK)
python3 -c "n=$n1-$n0; print('cpu per packet:   %.0f ns (%d packets, %.2f s of CPU)' % (($t1-$t0)/$hz*1e9/max(n,1), n, ($t1-$t0)/$hz))"
echo "tcp Gbit/s:       $(tcp_gbps)"
stop_dn

echo "== dummynet bridge, 10 Gbit/s and 10 ms each way"
start_dn 'sysctl net.inet.ip.dummynet.pipe_byte_limit=33554432\npipe 1 config bw 10Gbit/s delay 10ms queue 20000KBytes\npipe 2 config bw 10Gbit/s delay 10ms queue 20000KBytes\nadd 100 pipe 1 ip from any to any in recv m-a\nadd 200 pipe 2 ip from any to any in recv m-b\nadd 65000 allow ip from any to any\n'
echo "tcp Gbit/s:       $(tcp_gbps)"
echo "ping delay error: $(delay_error)"
DUMMYNET_SOCKET=$SOCK "$DN" stats | grep lateness
stop_dn
