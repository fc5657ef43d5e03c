#!/usr/bin/env bash
# The Debian package, dummynet_VERSION-1_ARCH.deb, from the release build
# that is already there (cargo build --release --locked -p dummynet; this
# script builds nothing, so CI's one release build makes it):
#   /usr/bin/dummynet                        the stripped binary
#   /usr/lib/dummynet/bin/{ipfw,dnctl}       links to it, in a directory of
#                                            the package's own: put it on PATH
#                                            to have them, a system ipfw is
#                                            never shadowed
#   /usr/share/man/man{7,8}/*.gz             the man pages and the
#   /usr/share/{bash-completion,zsh,fish}/   completions, as the binary's
#                                            `install` makes them
#   /usr/share/doc/dummynet/                 README.md, copyright, changelog.gz,
#                                            examples/ (demo.conf, demo.pcap, ...)
# dpkg-deb rather than cargo-deb: the layout above is all there is to it,
# and CI need not build a packaging tool first. Prints the package's path.
#
# Usage: scripts/deb.sh [OUT_DIR]   (default: target/debian)
# DUMMYNET_DEB_BINARY: another binary (default: target/release/dummynet);
# DEBFULLNAME and DEBEMAIL: the Maintainer field.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${DUMMYNET_DEB_BINARY:-target/release/dummynet}
out=${1:-target/debian}
[ -x "$bin" ] || { echo "deb.sh: no $bin: cargo build --release --locked -p dummynet first" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
[ -n "$version" ] || { echo "deb.sh: no version in Cargo.toml" >&2; exit 1; }
# Debian orders 0.2.0~rc.1 before 0.2.0, as semver orders 0.2.0-rc.1.
debversion="${version/-/\~}-1"
arch=$(dpkg --print-architecture)
maintainer="${DEBFULLNAME:-dummynet for Linux authors} <${DEBEMAIL:-dummynet@example.invalid}>"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
root="$stage/root"
# The man pages and completions, made by the binary from its own command
# line (what `dummynet install` puts under a prefix), then placed where
# Debian keeps them.
"$bin" install --dir "$stage/made/bin" >/dev/null
install -D -m 0755 "$bin" "$root/usr/bin/dummynet"
mkdir -p "$root/usr/lib/dummynet/bin"
for name in ipfw dnctl; do
    ln -s ../../../bin/dummynet "$root/usr/lib/dummynet/bin/$name"
done
made="$stage/made/share"
for page in "$made"/man/man*/*; do
    section=$(basename "$(dirname "$page")")
    install -D -m 0644 "$page" "$root/usr/share/man/$section/$(basename "$page")"
    gzip -9n "$root/usr/share/man/$section/$(basename "$page")"
done
install -D -m 0644 "$made/bash-completion/completions/dummynet" \
    "$root/usr/share/bash-completion/completions/dummynet"
install -D -m 0644 "$made/zsh/site-functions/_dummynet" \
    "$root/usr/share/zsh/vendor-completions/_dummynet"
install -D -m 0644 "$made/fish/vendor_completions.d/dummynet.fish" \
    "$root/usr/share/fish/vendor_completions.d/dummynet.fish"

doc="$root/usr/share/doc/dummynet"
install -D -m 0644 README.md "$doc/README.md"
install -D -m 0644 CHANGELOG.md "$doc/changelog"
gzip -9n "$doc/changelog"
mkdir -p "$doc/examples"
cp -r examples/. "$doc/examples/"
find "$doc/examples" -type d -exec chmod 0755 {} +
find "$doc/examples" -type f -exec chmod 0644 {} +
{
    echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
    echo "Upstream-Name: dummynet"
    echo
    echo "Files: *"
    echo "Copyright: $(sed -n 's/^Copyright (c) //p' LICENSE | head -n 1)"
    echo "License: BSD-2-Clause"
    # The licence's text, as the format wants it: indented, blank lines as " .".
    sed -n '/^Redistribution/,$p' LICENSE | sed -e 's/^$/./' -e 's/^/ /'
} > "$doc/copyright"

# What the binary links to, as packages: each shared library it needs, by
# the package that holds it here, at least the newest glibc symbol version
# it uses (what dpkg-shlibdeps would say, without needing dpkg-dev).
glibc=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
depends=()
for lib in $(objdump -p "$bin" | awk '$1 == "NEEDED" { print $2 }'); do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|x86_64/ { print $NF; exit }')
    [ -n "$path" ] || { echo "deb.sh: $lib (needed by $bin) is not on this machine" >&2; exit 1; }
    pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -n 1 | cut -d: -f1) \
        || pkg=$(dpkg -S "$path" | head -n 1 | cut -d: -f1)
    [ -n "$pkg" ] || { echo "deb.sh: no package holds $path" >&2; exit 1; }
    case "$pkg" in
        libc6) depends+=("libc6 (>= $glibc)") ;;
        *) depends+=("$pkg") ;;
    esac
done
depends_line=$(printf '%s\n' "${depends[@]}" | sort -u | paste -sd, - | sed 's/,/, /g')

mkdir -p "$root/DEBIAN"
(cd "$root" && find usr -type f -exec md5sum {} + | sort -k 2) > "$root/DEBIAN/md5sums"
cat > "$root/DEBIAN/control" <<EOF
Package: dummynet
Version: $debversion
Architecture: $arch
Maintainer: $maintainer
Installed-Size: $(du -sk --exclude=DEBIAN "$root" | cut -f1)
Depends: $depends_line
Recommends: iproute2, nftables
Suggests: iptables, iperf3, passt | slirp4netns
Section: net
Priority: optional
Description: FreeBSD's ipfw and dummynet network emulator, for Linux
 Emulates links (bandwidth, delay, loss, jitter, queues and their
 schedulers and AQMs) in userspace, configured in FreeBSD's ipfw/dnctl
 language: on a bridge between two interfaces, on this host's traffic, or
 around one command (dummynet shell); replays captures on a virtual clock
 (dummynet sim). The ipfw and dnctl names are links in
 /usr/lib/dummynet/bin, which is not on PATH, so a system ipfw is kept.
EOF

mkdir -p "$out"
deb="$out/dummynet_${debversion}_$arch.deb"
dpkg-deb --root-owner-group --build "$root" "$deb" >&2
echo "$deb"
