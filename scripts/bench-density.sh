#!/usr/bin/env bash
# Many links at once: N `dummynet shell` links side by side, each 16 Mbit/s
# and 10 ms each way (20 ms RTT), each carrying one saturating TCP flow
# (iperf3, DURATION s, all at once), then a ping (20 x 0.2 s) for its RTT.
#
#   separate (default): N shells, each its own emulator process;
#   --shared: one emulator (a first `dummynet shell -- sleep`), and N shells
#             that `--join` it (one data plane for all N links).
#
# Reports per-link throughput error (TCP goodput scaled to the IP bytes the
# pipe bills: x 1500/1448, against 16 Mbit/s) and RTT error (ping avg
# against 20 ms), median and max over links; the CPU of all dummynet
# processes over the TCP window (% of one core); their RSS per link under
# load, and in the shared form the emulator's RSS per idle link (after the
# joins, before traffic, less its RSS before them).
#
# Everything runs in a network namespace this script creates and removes:
# the shells' far ends and the iperf3 servers (one per link) are there.
# Bounded: every shell's command ends within SETUP + DURATION + 40 s, where
# SETUP (60 s + N/2 s) bounds the wait for every link to come up.
#
# NAPI=inline|threaded is passed to every shell as `--napi`: by default
# (threaded) each shell moves its link's receiving TCP stacks off the
# emulator's thread by itself (GRO and threaded NAPI on its ends, TSO off on
# the emulator's ports); NAPI=inline leaves the veths as the kernel makes
# them, so the emulator's sends run the receivers' stacks inline. A shell
# that could not set all of it says so (counted below).
#
# Needs root, ip, iperf3, ping. Usage:
#   sudo [DURATION=10] [GSO=on] [NAPI=inline] scripts/bench-density.sh N [--shared] [path/to/dummynet]
set -euo pipefail

N=${1:?usage: bench-density.sh N [--shared] [path/to/dummynet]}
MODE=separate
DN=target/release/dummynet
shift
for a in "$@"; do
    case $a in
        --shared) MODE=shared ;;
        *) DN=$a ;;
    esac
done
DURATION=${DURATION:-10}
[ -x "$DN" ] || { echo "build first: cargo build --release -p dummynet" >&2; exit 1; }
DN=$(realpath "$DN")
for tool in iperf3 ping ip; do
    command -v $tool >/dev/null || { echo "needs $tool" >&2; exit 1; }
done

TAG=dndens$$
NS=$TAG
WORK=$(mktemp -d /tmp/$TAG.XXXX)
cleanup() {
    # Our shells (and their commands) first, then the iperf3 servers.
    for f in "$WORK"/pid.*; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
    sleep 0.5
    for f in "$WORK"/iperf.*.pid; do [ -f "$f" ] && kill "$(cat "$f")" 2>/dev/null || true; done
    ip netns del "$NS" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

ip netns add "$NS"
ip -n "$NS" link set lo up
for i in $(seq 1 "$N"); do
    ip netns exec "$NS" iperf3 -s -D -p $((20000 + i)) --pidfile "$WORK/iperf.$i.pid" >/dev/null
done

# Inside each shell: wait for the start, TCP for DURATION s, then ping.
cat > "$WORK/inner.sh" <<'EOF'
i=$1; work=$2; duration=$3; setup=$4
n=0; while [ ! -e "$work/go" ] && [ $n -lt $((setup * 10)) ]; do sleep 0.1; n=$((n+1)); done
bps=$(iperf3 -c "$DUMMYNET_PEER" -p $((20000 + i)) -t "$duration" -f m 2>/dev/null \
      | awk '/receiver/ {print $7}')
rtt=$(ping -c 20 -i 0.2 -W 2 "$DUMMYNET_PEER" | awk -F/ '/^rtt/ {print $5}')
echo "$i ${bps:-0} ${rtt:-0}" > "$work/res.$i"
EOF

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
# utime + stime (fields 14, 15 after the command name, which may hold spaces).
# Nothing (not a failure, which would stop this script) for a process that
# has gone: a shell that could not start.
cpu_ticks() { { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; } 2>/dev/null || true; }
dn_pids() { for f in "$WORK"/pid.*; do [ -f "$f" ] && cat "$f"; done; }
sum() { local t=0; for p in $(dn_pids); do t=$(( t + $($1 "$p") )); done; echo $t; }
# The CPU each dummynet process used since `mark_cpu`, summed over those
# alive at both ends (one that ended meanwhile would count negative).
declare -A CPU0
mark_cpu() { for p in $(dn_pids); do CPU0[$p]=$(cpu_ticks "$p"); done; }
cpu_since() {
    local t=0 now
    for p in "${!CPU0[@]}"; do
        now=$(cpu_ticks "$p")
        [ -n "$now" ] && [ -n "${CPU0[$p]}" ] && t=$(( t + now - CPU0[$p] ))
    done
    echo $t
}

LINK=(--nat off --up "bw 16Mbit/s delay 10ms" --down "bw 16Mbit/s delay 10ms")
# GSO=on: TCP's super-packets cross whole (`--gso on`), one frame for up to
# 64 KB, billed for their segments' bytes but taking one queue slot each.
[ -n "${GSO:-}" ] && LINK+=(--gso "$GSO")
NAPI_ARGS=()
[ -n "${NAPI:-}" ] && NAPI_ARGS=(--napi "$NAPI")
LINK+=("${NAPI_ARGS[@]}")
SETUP=$((60 + N / 2))
cmd_for() { echo "sh $WORK/inner.sh $1 $WORK $DURATION $SETUP"; }
idle_kb=
if [ "$MODE" = shared ]; then
    ip netns exec "$NS" "$DN" shell --nat off "${NAPI_ARGS[@]}" --socket "$WORK/shared.sock" \
        -- sleep $((SETUP + DURATION + 120)) > "$WORK/log.0" 2>&1 &
    echo $! > "$WORK/pid.0"
    for _ in $(seq 50); do [ -S "$WORK/shared.sock" ] && break; sleep 0.1; done
    base_kb=$(rss_kb "$(cat "$WORK/pid.0")")
fi
for i in $(seq 1 "$N"); do
    if [ "$MODE" = shared ]; then
        ip netns exec "$NS" "$DN" shell --join "$WORK/shared.sock" "${LINK[@]}" \
            -- $(cmd_for "$i") > "$WORK/log.$i" 2>&1 &
    else
        ip netns exec "$NS" "$DN" shell --socket "$WORK/s.$i.sock" "${LINK[@]}" \
            -- $(cmd_for "$i") > "$WORK/log.$i" 2>&1 &
    fi
    echo $! > "$WORK/pid.$i"
done
# Every link up (its shell says which pipes, or its socket exists).
for _ in $(seq $((SETUP * 10))); do
    up=$(ls "$WORK" | grep -c '^s\..*sock$' || true)
    [ "$MODE" = shared ] && up=$(cat "$WORK"/log.[1-9]* 2>/dev/null | grep -c "joined as link" || true)
    [ "$up" -ge "$N" ] && break
    sleep 0.1
done
if [ "$up" -lt "$N" ]; then
    echo "only $up of $N links came up within $SETUP s; the first shells' complaints:" >&2
    grep -h -i -E "error|cannot|busy|refused|failed" "$WORK"/log.[1-9]* 2>/dev/null | sort | uniq -c | head -5 >&2 || true
fi
sleep 1
if [ "$MODE" = shared ]; then
    idle_kb=$(( ($(rss_kb "$(cat "$WORK/pid.0")") - base_kb) / N ))
fi
mark_cpu
t0=$(date +%s%N)
touch "$WORK/go"
sleep $((DURATION / 2))
load_rss=$(sum rss_kb)
sleep $((DURATION - DURATION / 2))
cpu=$(cpu_since)
# The window as it really was (a loaded machine stretches the sleeps).
window_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
# The shared emulator's own account of the TCP window: drops by reason,
# release lateness, its data plane's CPU.
if [ "$MODE" = shared ]; then
    "$DN" stats --socket "$WORK/shared.sock" 2>/dev/null \
        | grep -E '^(packets|drops|release lateness|precision)' > "$WORK/stats" || true
fi
for i in $(seq 1 "$N"); do
    for _ in $(seq 400); do [ -f "$WORK/res.$i" ] && break; sleep 0.1; done
done
hz=$(getconf CLK_TCK)
awk -v n="$N" -v mode="$MODE" -v gso="${GSO:+ (--gso $GSO)}" -v cpu="$cpu" -v hz="$hz" -v dur="$(awk -v m="$window_ms" 'BEGIN {print m / 1000}')" \
    -v rss="$load_rss" -v idle="${idle_kb:-}" -v napi="${NAPI:-threaded}" \
    -v unset="$(cat "$WORK"/log.* 2>/dev/null | grep -c "receiving TCP stacks may run" || true)" '
    { got++; tput = $2 * 1500 / 1448; te[got] = (tput > 16 ? tput - 16 : 16 - tput) / 16 * 100;
      re[got] = ($3 > 20 ? $3 - 20 : 20 - $3); if ($2 == 0 || $3 == 0) bad++ }
    function median(a, k,   i, j, t) { for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++)
        if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
        return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2 }
    END {
        printf "%-8s N=%d links measured=%d failed=%d%s --napi %s\n", mode, n, got, bad + 0, gso, napi
        if (unset > 0) printf "  shells that could not set up threaded NAPI: %d\n", unset
        printf "  throughput error: median %.2f%%  max %.2f%%\n", median(te, got), te[got]
        printf "  RTT error:        median %.2f ms  max %.2f ms\n", median(re, got), re[got]
        printf "  CPU (all dummynet processes, TCP window of %.1f s): %.0f%% of a core (%.2f%% per link)\n", \
            dur, cpu / hz / dur * 100, cpu / hz / dur * 100 / n
        printf "  RSS under load: %.2f MiB per link\n", rss / 1024 / n
        if (idle != "") printf "  shared emulator RSS per idle link: %.2f MiB\n", idle / 1024
    }' <(cat "$WORK"/res.* 2>/dev/null)
if [ -s "$WORK/stats" ]; then
    echo "  shared emulator (dummynet stats, from its start to the TCP window's end):"
    sed 's/^/    /' "$WORK/stats"
fi
