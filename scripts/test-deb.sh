#!/usr/bin/env bash
# The Debian package tried as a user would, on this machine (root): dpkg -i,
# then the binary, a shipped example through `sim`, the man pages, the
# links kept off PATH; then dpkg -r, after which none of the package's files
# or directories may be left. Refuses to start if a dummynet package or a
# /usr/bin/dummynet is there already (it would be replaced, then removed).
#
# Usage: scripts/test-deb.sh PATH.deb
set -euo pipefail
deb=$(readlink -f "${1:?usage: scripts/test-deb.sh PATH.deb}")
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

fail() { echo "test-deb: $*" >&2; exit 1; }
if dpkg-query -W -f='${Status}' dummynet 2>/dev/null | grep -q installed; then
    fail "a dummynet package is installed already (dpkg -r dummynet first)"
fi
[ ! -e /usr/bin/dummynet ] || fail "/usr/bin/dummynet exists and is no package's: not replacing it"

# Every path the package holds, from the archive itself.
mapfile -t paths < <(dpkg-deb --fsys-tarfile "$deb" | tar -t | sed -e 's|^\./|/|' -e 's|/$||' | grep -v '^/*$')
scratch=$(mktemp -d)
installed=0
cleanup() {
    [ "$installed" -eq 0 ] || dpkg -r dummynet >/dev/null 2>&1 || true
    rm -rf "$scratch"
}
trap cleanup EXIT

dpkg -i "$deb" >/dev/null
installed=1
said=$(dummynet --version)
echo "$said"
case "$said" in "dummynet $version"*) ;; *) fail "--version said '$said', not dummynet $version" ;; esac
[ "$(command -v dummynet)" = /usr/bin/dummynet ] || fail "dummynet on PATH is $(command -v dummynet), not /usr/bin/dummynet"
examples=/usr/share/doc/dummynet/examples
dummynet sim --config "$examples/demo.conf" --pcap "$examples/demo.pcap" \
    --out "$scratch/out.pcap" --log "$scratch/events.jsonl" >/dev/null
[ -s "$scratch/out.pcap" ] && [ -s "$scratch/events.jsonl" ] || fail "sim on $examples/demo.conf wrote nothing"
page=$(man -w dummynet)
[ "$page" = /usr/share/man/man8/dummynet.8.gz ] || fail "man -w dummynet: '$page'"
[ "$(man -w 7 dummynet-language)" = /usr/share/man/man7/dummynet-language.7.gz ] || fail "no dummynet-language(7)"
man dummynet 2>/dev/null | grep -q 'dummynet' || fail "man dummynet shows no page"
for name in ipfw dnctl; do
    [ "$(readlink -f "/usr/lib/dummynet/bin/$name")" = /usr/bin/dummynet ] || fail "/usr/lib/dummynet/bin/$name is not a link to dummynet"
    case "$(command -v "$name" || true)" in /usr/lib/dummynet/*) fail "$name on PATH is the package's" ;; esac
done
# The link behaves as ipfw: a syntax error is ipfw's exit status 64, before
# any daemon is asked.
status=0
/usr/lib/dummynet/bin/ipfw no-such-command >/dev/null 2>&1 || status=$?
[ "$status" -eq 64 ] || fail "/usr/lib/dummynet/bin/ipfw no-such-command: exit $status, not 64"
for f in /usr/share/bash-completion/completions/dummynet /usr/share/zsh/vendor-completions/_dummynet \
    /usr/share/fish/vendor_completions.d/dummynet.fish /usr/share/doc/dummynet/README.md \
    /usr/share/doc/dummynet/copyright; do
    [ -s "$f" ] || fail "the package did not install $f"
done

dpkg -r dummynet >/dev/null
installed=0
# Without conffiles dpkg forgets the package altogether.
state=$(dpkg-query -W -f='${Status}' dummynet 2>/dev/null || true)
case "$state" in "" | *not-installed) ;; *) fail "after dpkg -r, dpkg says: $state" ;; esac
# Files, links and the package's own directories are gone; directories
# others share (/usr/share/man/man8, ...) stay, as they should.
left=()
for p in "${paths[@]}"; do
    if [ -d "$p" ] && [ ! -L "$p" ]; then
        case "$p" in /usr/lib/dummynet* | /usr/share/doc/dummynet*) left+=("$p") ;; esac
    elif [ -e "$p" ] || [ -L "$p" ]; then
        left+=("$p")
    fi
done
[ "${#left[@]}" -eq 0 ] || fail "left on disk after dpkg -r: ${left[*]}"
echo "deb: $(basename "$deb"), $(stat -c %s "$deb") bytes: installed, ran, removed without a trace (${#paths[@]} paths checked)"
