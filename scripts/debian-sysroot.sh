#!/bin/sh
# Unpack, once per machine, Debian packages of another architecture into a
# folder and print its path: a sysroot for qemu-user (`qemu-aarch64-static -L
# DIR prog`) without adding the architecture to this system's dpkg. apt
# fetches them from the mirror for that architecture and checks them against
# the suite's signed Release file, as any apt download.
#
#   scripts/debian-sysroot.sh ARCH PACKAGE...        e.g. arm64 libc6
#
# Cached where scripts/debian-source.sh caches (scripts/cache-lock.sh) as
# sysroot-ARCH-<hash of the suite, mirror and packages>. SUITE (default the
# host's, else bookworm) and DEBIAN_MIRROR choose where from.
set -eu

[ $# -ge 2 ] || { echo "usage: $0 ARCH PACKAGE..." >&2; exit 2; }
ARCH=$1; shift
. /etc/os-release 2>/dev/null || true
SUITE=${SUITE:-${VERSION_CODENAME:-bookworm}}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
. "$(dirname "$0")/cache-lock.sh"
say() { echo "debian-sysroot: $*" >&2; }

NAME=sysroot-$ARCH-$(printf '%s\n' "$SUITE" "$MIRROR" "$@" | sha256sum | cut -c1-8)
DIR=$CACHE/$NAME
cached_or_lock "$DIR" .crun-sysroot

TMP=$CACHE/.$NAME.tmp-$$
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
mkdir -p "$TMP/lists/partial" "$TMP/cache/archives/partial" "$TMP/debs" "$TMP/root"
echo "deb [arch=$ARCH] $MIRROR $SUITE main" >"$TMP/sources.list"
apt() {
	apt-get -q -o APT::Architecture="$ARCH" -o APT::Architectures::="$ARCH" \
		-o Dir::State::Lists="$TMP/lists" -o Dir::Cache="$TMP/cache" \
		-o Dir::Etc::SourceList="$TMP/sources.list" -o Dir::Etc::SourceParts=/dev/null \
		-o Dir::State::status=/dev/null -o APT::Sandbox::User=root "$@"
}
apt update >"$TMP/log" 2>&1 || { cat "$TMP/log" >&2; say "apt-get update for $ARCH failed"; exit 1; }
(cd "$TMP/debs" && apt download $(for p; do echo "$p:$ARCH"; done)) >>"$TMP/log" 2>&1 ||
	{ cat "$TMP/log" >&2; say "downloading $* for $ARCH failed"; exit 1; }
for d in "$TMP"/debs/*.deb; do dpkg-deb -x "$d" "$TMP/root"; done
(cd "$TMP/debs" && ls) >"$TMP/root/.crun-sysroot"
rm -rf "$DIR"
mv -T "$TMP/root" "$DIR"
say "unpacked $(tr '\n' ' ' <"$DIR/.crun-sysroot")into $DIR"
echo "$DIR"
