#!/bin/bash
# The library crates' dependency walls (issue 28): an embedder of the data
# plane and the daemon builds without the HTTP stack or the plotting stack
# (and without clap); only dummynet-sim (and dummynet-tools, through it)
# has plotters and resvg, only dummynet-http axum, hyper and tokio, which the binary takes
# only with its `http` feature. Fails, naming the crate and what it pulled in, if one does.
set -euo pipefail
cd "$(dirname "$0")/.."

# crate, then the packages its normal (non-dev, non-build) tree must not hold.
walls=(
    "dummynet-dataplane axum tokio hyper hyper-util plotters resvg clap"
    "dummynet-daemon axum tokio hyper hyper-util plotters resvg clap"
    "dummynet-sim axum tokio hyper hyper-util"
    "dummynet-tools axum tokio hyper hyper-util"
)
members=$(cargo metadata --no-deps --format-version 1 --locked |
    python3 -c 'import json,sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["packages"]))')
bad=0
checked=0
for wall in "${walls[@]}"; do
    read -r crate forbidden <<<"$wall"
    case " $members " in *" $crate "*) ;; *) continue ;; esac
    tree=$(cargo tree --locked -p "$crate" -e normal --prefix none --format '{p}' | awk '{print $1}' | sort -u)
    for name in $forbidden; do
        if grep -qx "$name" <<<"$tree"; then
            echo "check-layers: $crate depends on $name:" >&2
            cargo tree --locked -p "$crate" -e normal -i "$name" >&2 || true
            bad=1
        fi
    done
    checked=$((checked + 1))
done
# The binary without its `http` feature: no HTTP stack either.
tree=$(cargo tree --locked -p dummynet --no-default-features -e normal --prefix none --format '{p}' | awk '{print $1}' | sort -u)
for name in axum tokio hyper hyper-util dummynet-http; do
    if grep -qx "$name" <<<"$tree"; then
        echo "check-layers: dummynet --no-default-features depends on $name" >&2
        bad=1
    fi
done
if [ "$checked" -eq 0 ]; then
    echo "check-layers: none of the walled crates is in the workspace" >&2
    exit 1
fi
exit $bad
