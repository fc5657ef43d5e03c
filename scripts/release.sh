#!/usr/bin/env bash
# The static release tarball, from one release build for x86_64 musl:
#   dummynet-VERSION-x86_64-unknown-linux-musl.tar.gz and its .sha256
# holding bin/dummynet with its ipfw and dnctl links, share/ (man pages and
# shell completions, as `dummynet install` writes them), README.md, LICENSE
# and CHANGELOG.md. Needs the musl target (rustup target add
# x86_64-unknown-linux-musl). Prints the tarball's path.
#
# Usage: scripts/release.sh [OUT_DIR]   (default: target/dist)
set -euo pipefail
cd "$(dirname "$0")/.."

target=x86_64-unknown-linux-musl
out=${1:-target/dist}
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
[ -n "$version" ] || { echo "release.sh: no version in Cargo.toml" >&2; exit 1; }

cargo build --release --locked -p dummynet --target "$target" >&2
name="dummynet-$version-$target"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
# The binary installs itself, its links, its man pages and completions.
"target/$target/release/dummynet" install --dir "$stage/$name/bin" >&2
cp README.md LICENSE CHANGELOG.md "$stage/$name/"

mkdir -p "$out"
tar -C "$stage" --owner=0 --group=0 --numeric-owner --sort=name -czf "$out/$name.tar.gz" "$name"
(cd "$out" && sha256sum "$name.tar.gz" > "$name.tar.gz.sha256")
echo "$out/$name.tar.gz"
