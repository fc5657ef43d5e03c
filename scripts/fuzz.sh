#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each, one after the other (libFuzzer
# via cargo-fuzz, on the nightly toolchain), and reports the executions and
# crashes of each. Exits non-zero if any target crashed or failed to run.
#
#   scripts/fuzz.sh 60                   # every target, a minute each
#   scripts/fuzz.sh 600 engine_sequence  # some targets only
#
# Seeds come from fuzz/seeds/TARGET (kept in the repository); what the
# fuzzer learns goes to fuzz/corpus/TARGET (ignored by git), so a later run
# starts from it. A crash is saved under fuzz/artifacts/TARGET/; replay it
# with `cargo +nightly fuzz run TARGET fuzz/artifacts/TARGET/crash-...`.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"

secs="${1:-}"
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -eq 0 ]; then
    echo "usage: scripts/fuzz.sh SECONDS [TARGET...]" >&2
    exit 64
fi
shift
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "fuzz.sh: needs cargo-fuzz on the nightly toolchain:" >&2
    echo "  rustup toolchain install nightly && cargo install cargo-fuzz --locked" >&2
    exit 69
fi
if [ "$#" -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo +nightly fuzz list)
fi

# Text targets get the ipfw keyword dictionary.
dict_for() {
    case "$1" in
        commands_file | command_line | control_request) echo "-dict=ipfw.dict" ;;
    esac
}

# Build once, with debug assertions (overflow checks) on, as `run` does.
cargo +nightly fuzz build 2>&1 | tail -n 2

failed=0
summary=()
log_dir="$(mktemp -d)"
trap 'rm -rf "$log_dir"' EXIT
for t in "${targets[@]}"; do
    mkdir -p "corpus/$t" "seeds/$t"
    log="$log_dir/$t.log"
    echo "== fuzz $t for ${secs}s"
    status=0
    # shellcheck disable=SC2046 # the dictionary flag is one word or none
    cargo +nightly fuzz run "$t" "corpus/$t" "seeds/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -max_len=8192 \
        -print_final_stats=1 $(dict_for "$t") >"$log" 2>&1 || status=$?
    execs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
    cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -n 1 || true)"
    if [ "$status" -ne 0 ]; then
        failed=1
        crash="$(grep -oE 'artifacts/[^ ]+' "$log" | tail -n 1 || true)"
        tail -n 40 "$log"
        summary+=("$t: FAILED (exit $status) after ${execs:-?} executions ${crash:+- fuzz/$crash}")
    else
        summary+=("$t: ${execs:-?} executions, 0 crashes, ${cov:-cov: ?}")
    fi
done

echo "== fuzz summary (${secs}s per target)"
printf '%s\n' "${summary[@]}"
exit "$failed"
