#!/usr/bin/env bash
# Soak: the live daemon under overload for MINUTES, in bridge mode for the
# first half and host mode for the second, in namespaces this script creates
# and always removes. Everything runs at once:
#
#   - a 64-byte flood at about 5x what its pipe carries (20k frames/s into
#     2 Mbit/s) and a 1400-byte flood at about 4.5x (8k frames/s into
#     20 Mbit/s), both from `dummynet flood`;
#   - TCP (iperf3, two streams) through 50 Mbit/s and 10 ms one way, 5 ms back;
#   - two floods of FLOWS flows each (the source port cycles; the source
#     address changes every 5 s): one through a pipe with a mask, one
#     scheduler instance per flow, one through a queue with a mask under a
#     WF2Q+ pipe, one queue per flow: thousands of dynamic instances and
#     queues, made, left idle and expired (after 1 s idle);
#   - a reconfiguration storm: about 20 commands a second, alternating
#     `pipe N config` and `pipe N modify` of the flooded pipes, a pipe made
#     and deleted, and a rule added and deleted;
#   - control clients polling `stats`, `pipe show` and `show` every 0.2 s.
#
#   bridge:  ns A --veth-- ns M (dummynet run --bridge) --veth-- ns B
#   host:    ns A --veth-- ns B (dummynet run --host)
#
# Every INTERVAL seconds it samples the daemon's RSS and CPU time
# (/proc/PID), the release lateness (p50/p99 of the recent hand-overs, max
# since start) and the books (`dummynet stats`) into DIR/samples.csv, and
# draws DIR/soak.svg from it (scripts/soak-plot.py, when python3 is there).
#
# It fails, saying why, if:
#   - memory grows: the RSS at the last sample exceeds the RSS at the end of
#     warm-up (the first 20% of the mode's run, at least 15 s) by more than
#     10% + 8 MiB;
#   - forwarding stops: `delivered` does not rise between two samples;
#   - the books do not balance: once traffic has stopped and the pipes have
#     drained, arrived != delivered + dropped, or anything is left inside;
#   - the daemon dies, panics, or does not exit cleanly on SIGTERM.
#
# Needs root, ip, iperf3, nft or iptables. Traffic goes only between the
# namespaces it creates; every loop ends by the deadline.
#
# Usage: scripts/soak.sh [--out DIR] [--bin path/to/dummynet]
#                        [--precision max|timer] [--interval SECONDS] MINUTES
# MINUTES may be fractional (0.5); the default binary is target/release.
# FLOWS=N in the environment sets the flows of each masked flood (3000).
set -euo pipefail

OUT= DN=target/release/dummynet PRECISION= INTERVAL= MINUTES=
while [ $# -gt 0 ]; do
    case $1 in
    --out) OUT=$2; shift 2;;
    --bin) DN=$2; shift 2;;
    --precision) PRECISION=$2; shift 2;;
    --interval) INTERVAL=$2; shift 2;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
    -*) echo "soak.sh: unknown option $1 (see --help)" >&2; exit 2;;
    *) [ -z "$MINUTES" ] || { echo "soak.sh: one MINUTES only" >&2; exit 2; }
       MINUTES=$1; shift;;
    esac
done
[[ "$MINUTES" =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
    { echo "soak.sh: MINUTES must be a positive number, got '${MINUTES}'" >&2; exit 2; }
[ -x "$DN" ] || { echo "soak.sh: no binary at $DN: cargo build --release -p dummynet" >&2; exit 2; }
DN=$(realpath "$DN")
for tool in ip iperf3 awk; do
    command -v $tool >/dev/null || { echo "soak.sh: needs $tool" >&2; exit 2; }
done
[ "$(id -u)" = 0 ] || { echo "soak.sh: needs root (namespaces)" >&2; exit 2; }

# Seconds per mode: half of MINUTES each, at least 20.
PER_MODE=$(awk -v m="$MINUTES" 'BEGIN { s = int(m * 30); print (s < 20 ? 20 : s) }')
[ -n "$INTERVAL" ] || INTERVAL=$(( PER_MODE >= 150 ? 5 : 2 ))
# Warm-up: the first 20% of each mode, at least 15 s (two rounds of the
# masked floods' flow sets: the allocator reaches its high-water mark).
WARMUP=$(( PER_MODE / 5 > 15 ? PER_MODE / 5 : 15 ))
FLOWS=${FLOWS:-3000}
RSS_SLACK_PCT=10 RSS_SLACK_KB=8192

TAG=dns$$
A=$TAG-a M=$TAG-m B=$TAG-b
[ -n "$OUT" ] || OUT=$(mktemp -d /tmp/dummynet-soak.XXXXXX)
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
WORK=$(mktemp -d /tmp/$TAG.XXXX)
SOCK=$WORK/ctl.sock
CSV=$OUT/samples.csv
DNPID= LOOPS=() FAIL=()

# Stops what this script started and deletes its namespaces: every process
# left inside them was started here.
teardown() {
    local p
    for p in "${LOOPS[@]}"; do kill "$p" 2>/dev/null || true; done
    LOOPS=()
    if [ -n "$DNPID" ]; then kill -TERM "$DNPID" 2>/dev/null || true; wait "$DNPID" 2>/dev/null || true; fi
    DNPID=
    for ns in $A $M $B; do
        for p in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        ip netns del "$ns" 2>/dev/null || true
    done
    rm -f "$SOCK"
}
cleanup() {
    teardown
    rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

dnctl() { "$DN" ipfw --socket "$SOCK" "$@"; }
stats() { DUMMYNET_SOCKET=$SOCK "$DN" stats; }

# The pipes and rules; flows are told apart by their source address.
cat > "$WORK/soak.conf" <<'EOF'
pipe 1 config bw 2Mbit/s queue 50
pipe 2 config bw 20Mbit/s queue 50
pipe 3 config bw 50Mbit/s delay 10ms queue 100
pipe 6 config bw 50Mbit/s delay 5ms queue 100
pipe 4 config bw 1Mbit/s queue 4 mask src-ip 0xffffffff src-port 0xffff
pipe 5 config bw 4Mbit/s
queue 5 config pipe 5 queue 4 mask src-ip 0xffffffff src-port 0xffff
add 100 pipe 1 ip from 10.203.0.11 to any in
add 200 pipe 2 ip from 10.203.0.12 to any in
add 300 pipe 4 ip from 10.203.1.0/24 to any in
add 400 queue 5 ip from 10.203.2.0/24 to any in
add 500 pipe 3 tcp from 10.203.0.1 to 10.203.0.2 in
add 600 pipe 6 tcp from 10.203.0.2 to 10.203.0.1 in
add 610 pipe 6 tcp from 10.203.0.2 to 10.203.0.1 out xmit vb
add 65000 allow ip from any to any
EOF

echo "mode,t_s,rss_kb,cpu_s,late_p50_us,late_p99_us,late_max_us,arrived,delivered,dropped,inside,instances,queues,drops" > "$CSV"

# One row of samples.csv from /proc and `dummynet stats`.
sample() { # $1 mode, $2 seconds since the mode started
    local rss cpu st hz
    hz=$(getconf CLK_TCK)
    rss=$(awk '/^VmRSS:/ {print $2}' /proc/$DNPID/status 2>/dev/null) || return 1
    cpu=$(awk -v hz="$hz" '{printf "%.2f", ($14 + $15) / hz}' /proc/$DNPID/stat 2>/dev/null) || return 1
    st=$(stats 2>&1) || { echo "stats failed: $st" >&2; return 1; }
    # Dynamic scheduler instances (` sched N ... K active`) and queues
    # (`qNNNNN ... F flows`) of every pipe and queue.
    local dyn
    dyn=$( { dnctl pipe show; dnctl queue show; } 2>/dev/null | awk '
        /^ sched [0-9]+ type/ { for (k = 1; k < NF; k++) if ($(k + 1) == "active") s += $k }
        /^q[0-9]+ / { for (k = 1; k < NF; k++) if ($(k + 1) == "flows") q += $k }
        END { printf "%d,%d", s, q }')
    awk -v mode="$1" -v t="$2" -v rss="$rss" -v cpu="$cpu" -v dyn="$dyn" '
        /^packets:/ { gsub(",", ""); a = $2; d = $4; x = $6; i = $8 }
        /^drops:/ { sub(/^drops: /, ""); gsub(", ", ";"); gsub(" ", "="); drops = $0 }
        /^release lateness/ {
            for (k = 1; k <= NF; k++) {
                if ($k == "p50") p50 = $(k + 1); if ($k == "p99") p99 = $(k + 1)
                if ($k == "max") mx = $(k + 1)
            }
        }
        END {
            if (a == "") exit 1
            printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", mode, t, rss, cpu,
                p50, p99, mx, a, d, x, i, dyn, drops
        }' <<<"$st"
}

# Loops, each ending by $END (a date +%s).
flood_loop() { # $1 source addresses (in turn), $2 size, $3 rate, $4 flows,
               # $5 dst mac, $6 seconds per address
    local left srcs=($1) k=0
    while left=$(( END - $(date +%s) )); [ "$left" -gt 0 ]; do
        ip netns exec $A "$DN" flood va --seconds $(( left > $6 ? $6 : left )) --size "$2" \
            --rate "$3" --flows "$4" --src "${srcs[k % ${#srcs[@]}]}" --dst 10.203.0.2 \
            --dst-mac "$5" >>"$OUT/flood-$MODE.log" 2>&1 || sleep 0.2
        k=$(( k + 1 ))
    done
}
tcp_loop() {
    local left
    while left=$(( END - $(date +%s) )); [ "$left" -gt 2 ]; do
        ip netns exec $A iperf3 -c 10.203.0.2 -p 5299 -P 2 -t $(( left > 30 ? 30 : left - 1 )) \
            >>"$OUT/iperf-$MODE.log" 2>&1 || sleep 0.5
    done
}
storm_loop() { # about 20 commands a second
    local n=0 bw
    while [ "$(date +%s)" -lt "$END" ]; do
        n=$(( n + 1 )); bw=$(( 1 + n % 4 ))
        {
            dnctl pipe 1 config bw ${bw}Mbit/s queue 50
            dnctl pipe 2 modify bw $(( bw * 10 ))Mbit/s
            dnctl pipe 7 config bw ${bw}Mbit/s delay ${n}ms
            dnctl add 700 count udp from 10.203.0.99 to any dst-port $(( 1000 + n ))
            dnctl pipe 2 config bw 20Mbit/s queue 50
            dnctl delete 700
            dnctl pipe 7 delete
            dnctl pipe 1 modify bw 2Mbit/s
        } >/dev/null 2>>"$WORK/storm.err" || echo "storm: a command failed at round $n" >>"$WORK/storm.err"
        echo $(( n * 8 )) > "$WORK/storm.n"
        sleep 0.1
    done
}
poll_loop() {
    while [ "$(date +%s)" -lt "$END" ]; do
        stats >/dev/null 2>>"$WORK/poll.err" || echo "poll: stats failed" >>"$WORK/poll.err"
        dnctl pipe show >/dev/null 2>>"$WORK/poll.err" || echo "poll: pipe show failed" >>"$WORK/poll.err"
        dnctl show >/dev/null 2>>"$WORK/poll.err" || echo "poll: show failed" >>"$WORK/poll.err"
        sleep 0.2
    done
}

run_mode() { # $1 bridge|host
    MODE=$1
    local mode=$1 start now t last_d=-1 warm_rss= end_rss= row d i=0 fin=
    for ns in $A $M $B; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
    if [ "$mode" = bridge ]; then
        ip link add va netns $A type veth peer name m-a netns $M
        ip link add vb netns $B type veth peer name m-b netns $M
        ip -n $M link set m-a up; ip -n $M link set m-b up
    else
        ip link add va netns $A type veth peer name vb netns $B
    fi
    ip -n $A addr add 10.203.0.1/24 dev va
    ip -n $B addr add 10.203.0.2/24 dev vb
    ip -n $A link set va up; ip -n $B link set vb up
    # No one owns the bridge's destination MAC: B's stack drops the floods
    # at once. In host mode they must reach B's stack to reach the queue.
    local mac=02:00:00:00:00:02
    [ "$mode" = host ] && mac=$(ip netns exec $B cat /sys/class/net/vb/address)
    ip netns exec $B iperf3 -s -D -p 5299 >/dev/null

    local args=(run --config "$WORK/soak.conf" --socket "$SOCK")
    [ -n "$PRECISION" ] && args+=(--precision "$PRECISION")
    if [ "$mode" = bridge ]; then
        ip netns exec $M "$DN" "${args[@]}" --bridge m-a m-b >"$OUT/daemon-$mode.log" 2>&1 &
    else
        ip netns exec $B "$DN" "${args[@]}" --host >"$OUT/daemon-$mode.log" 2>&1 &
    fi
    DNPID=$!
    for _ in $(seq 100); do [ -S "$SOCK" ] && break; sleep 0.1; done
    if ! [ -S "$SOCK" ]; then
        FAIL+=("$mode: the daemon made no control socket: $(tail -1 "$OUT/daemon-$mode.log")")
        teardown
        return
    fi
    # `ip netns exec` execs the daemon: $DNPID is the daemon itself.

    start=$(date +%s); END=$(( start + PER_MODE ))
    LOOPS=()
    flood_loop 10.203.0.11 64 20000 1 $mac 60 & LOOPS+=($!)
    flood_loop 10.203.0.12 1400 8000 1 $mac 60 & LOOPS+=($!)
    # A new set of flows every 5 s: the last set's instances and queues go
    # idle and must expire.
    flood_loop "10.203.1.1 10.203.1.2 10.203.1.3 10.203.1.4" 100 3000 "$FLOWS" $mac 5 & LOOPS+=($!)
    flood_loop "10.203.2.1 10.203.2.2 10.203.2.3 10.203.2.4" 100 3000 "$FLOWS" $mac 5 & LOOPS+=($!)
    tcp_loop & LOOPS+=($!)
    storm_loop & LOOPS+=($!)
    poll_loop & LOOPS+=($!)

    echo "== $mode: $PER_MODE s, sampling every $INTERVAL s, warm-up $WARMUP s"
    while now=$(date +%s); [ "$now" -lt "$END" ]; do
        sleep "$INTERVAL"
        t=$(( $(date +%s) - start ))
        if ! kill -0 "$DNPID" 2>/dev/null; then
            FAIL+=("$mode: the daemon died at ${t} s (see $OUT/daemon-$mode.log)"); break
        fi
        row=$(sample "$mode" "$t") || { FAIL+=("$mode: no sample at ${t} s"); continue; }
        echo "$row" >> "$CSV"
        i=$(( i + 1 ))
        d=$(cut -d, -f9 <<<"$row")
        # The first sample may come before the first delivery.
        if [ "$i" -gt 1 ] && [ "$d" -le "$last_d" ]; then
            FAIL+=("$mode: forwarding stopped: delivered stayed at $d between ${t}-${INTERVAL} s and ${t} s")
        fi
        last_d=$d
        [ -z "$warm_rss" ] && [ "$t" -ge "$WARMUP" ] && warm_rss=$(cut -d, -f3 <<<"$row")
        end_rss=$(cut -d, -f3 <<<"$row")
        printf '  %4s s  RSS %6s kB  CPU %7s s  lateness p50/p99/max %s/%s/%s us  delivered %s  instances/queues %s/%s\n' \
            "$t" "$end_rss" "$(cut -d, -f4 <<<"$row")" "$(cut -d, -f5 <<<"$row")" \
            "$(cut -d, -f6 <<<"$row")" "$(cut -d, -f7 <<<"$row")" "$d" \
            "$(cut -d, -f12 <<<"$row")" "$(cut -d, -f13 <<<"$row")"
    done
    wait "${LOOPS[@]}" 2>/dev/null || true
    LOOPS=()
    echo "  storm: $(cat "$WORK/storm.n" 2>/dev/null || echo 0) commands in $PER_MODE s"
    echo "  tcp: $(grep -c 'SUM.*receiver' "$OUT/iperf-$mode.log" 2>/dev/null || true) iperf3 runs, received" \
        "$(awk '/SUM.*receiver/ {printf "%s %s  ", $(NF-2), $(NF-1)}' "$OUT/iperf-$mode.log" 2>/dev/null)"

    if kill -0 "$DNPID" 2>/dev/null; then
        # Drain: nothing arrives now; wait (bounded) for the pipes to empty.
        for _ in $(seq 150); do
            fin=$(stats 2>/dev/null | awk '/^packets:/ {gsub(",", ""); print $2, $4, $6, $8}') || fin=
            [ -n "$fin" ] && [ "$(cut -d' ' -f4 <<<"$fin")" = 0 ] && break
            sleep 0.2
        done
        if [ -z "$fin" ]; then
            FAIL+=("$mode: no final stats")
        else
            read -r fa fd fx fi_ <<<"$fin"
            echo "  books: $fa arrived = $fd delivered + $fx dropped + $fi_ inside"
            [ "$fa" = $(( fd + fx + fi_ )) ] ||
                FAIL+=("$mode: the books do not balance: $fa arrived, $fd delivered + $fx dropped + $fi_ inside = $(( fd + fx + fi_ ))")
            [ "$fi_" = 0 ] || FAIL+=("$mode: $fi_ packets still inside 30 s after the traffic stopped")
            stats > "$OUT/stats-$mode.txt" 2>&1 || true
            echo "  $(grep '^drops:' "$OUT/stats-$mode.txt" || echo 'drops: none')"
        fi
        if [ -n "$warm_rss" ] && [ -n "$end_rss" ]; then
            local allowed=$(( warm_rss + warm_rss * RSS_SLACK_PCT / 100 + RSS_SLACK_KB ))
            echo "  RSS: $warm_rss kB after warm-up, $end_rss kB at the end (allowed $allowed kB)"
            [ "$end_rss" -le "$allowed" ] ||
                FAIL+=("$mode: memory grew after warm-up: RSS $warm_rss kB at ${WARMUP} s, $end_rss kB at the end (allowed $allowed kB)")
        else
            FAIL+=("$mode: too few samples to judge memory (warm-up $warm_rss, end $end_rss)")
        fi
        kill -TERM "$DNPID"
        local rc=0
        wait "$DNPID" || rc=$?
        [ "$rc" = 0 ] || FAIL+=("$mode: the daemon exited with status $rc on SIGTERM")
    fi
    DNPID=
    if grep -q 'panicked' "$OUT/daemon-$mode.log"; then
        FAIL+=("$mode: the daemon panicked: $(grep -m1 panicked "$OUT/daemon-$mode.log")")
    fi
    [ -s "$WORK/storm.err" ] && { echo "  storm errors (first 3):"; head -3 "$WORK/storm.err" | sed 's/^/    /'; }
    [ -s "$WORK/poll.err" ] && { echo "  poll errors (first 3):"; head -3 "$WORK/poll.err" | sed 's/^/    /'; }
    cp "$WORK/storm.err" "$OUT/storm-errors-$mode.txt" 2>/dev/null || true
    rm -f "$WORK/storm.err" "$WORK/poll.err" "$WORK/storm.n"
    teardown
}

echo "soak: $DN, $MINUTES min ($PER_MODE s bridge, then $PER_MODE s host), $FLOWS flows per masked flood, out $OUT"
run_mode bridge
run_mode host

if command -v python3 >/dev/null; then
    python3 "$(dirname "$0")/soak-plot.py" "$CSV" "$OUT/soak.svg" && echo "plot: $OUT/soak.svg"
fi
echo "samples: $CSV"
if [ ${#FAIL[@]} -gt 0 ]; then
    echo "soak FAILED:"
    printf '  %s\n' "${FAIL[@]}"
    exit 1
fi
echo "soak passed: memory flat after warm-up, forwarding never stopped, books balanced"
