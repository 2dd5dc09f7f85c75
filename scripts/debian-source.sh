#!/bin/sh
# Fetch, once per machine, the upstream source of a Debian source package
# (its .orig tarball, as Debian's mirror has it) and print the path of the
# unpacked tree. The .dsc is checked against the SHA-256 given here, and the
# tarball against the .dsc's own checksum, so a mirror can only serve the
# very bytes named. Debian's patches are not applied: this is upstream's
# code as Debian ships it.
#
#   scripts/debian-source.sh PACKAGE VERSION DSC_SHA256 [MEMBER...]
#
# MEMBERs (tar patterns below the tarball's top folder, e.g.
# 'test/distributed/launcher/*') unpack only those. The tree is cached in
# $CRUN_SOURCES (default /var/cache/crun-sources as root, else
# ~/.cache/crun-sources) as PACKAGE-VERSION[-<hash
# of the members>], unpacked beside and renamed into place when complete,
# under a lock. DEBIAN_MIRROR (default http://deb.debian.org/debian) is the
# mirror. Only the path goes to stdout; what it does to stderr.
set -eu

[ $# -ge 3 ] || { echo "usage: $0 PACKAGE VERSION DSC_SHA256 [MEMBER...]" >&2; exit 2; }
PKG=$1 VER=$2 DSC_SUM=$3; shift 3
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
. "$(dirname "$0")/cache-lock.sh"
say() { echo "debian-source: $*" >&2; }

NAME=$PKG-$VER
[ $# -eq 0 ] || NAME=$NAME-$(printf '%s\n' "$@" | sha256sum | cut -c1-8)
TREE=$CACHE/$NAME
cached_or_lock "$TREE" .crun-source

case $PKG in lib?*) POOL=$(echo "$PKG" | cut -c1-4) ;; *) POOL=$(echo "$PKG" | cut -c1) ;; esac
BASE=$MIRROR/pool/main/$POOL/$PKG
UPVER=${VER#*:}
DSC=${PKG}_$UPVER.dsc
TMP=$CACHE/.$NAME.tmp-$$
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
rm -rf "$TMP"; mkdir -p "$TMP/tree"

# fetch FILE: FILE from the package's pool folder into $TMP (curl, or wget).
fetch() {
	_url=$BASE/$(echo "$1" | sed 's/+/%2b/g')
	if command -v curl >/dev/null 2>&1; then
		curl -fsSL --retry 3 -o "$TMP/$1" "$_url"
	else
		wget -q -O "$TMP/$1" "$_url"
	fi || { say "cannot fetch $_url"; exit 1; }
}
# check FILE SHA256
check() {
	_got=$(sha256sum "$TMP/$1" | cut -d' ' -f1)
	[ "$_got" = "$2" ] || { say "$1: SHA-256 $_got, want $2"; exit 1; }
}

start=$(date +%s)
fetch "$DSC"
check "$DSC" "$DSC_SUM"
# The upstream tarball the .dsc names under Checksums-Sha256 (.orig, or the
# only tarball of a native package).
line=$(sed -n '/^Checksums-Sha256:/,/^[^ ]/p' "$TMP/$DSC" |
	grep -E '^ [0-9a-f]{64} [0-9]+ [^ ]+(\.orig\.tar\.[a-z0-9]+|[0-9]\.tar\.[a-z0-9]+)$' |
	grep -v 'debian\.tar' | head -n 1) || true
[ -n "$line" ] || { say "$DSC names no upstream tarball"; exit 1; }
sum=$(echo "$line" | cut -d' ' -f2)
tarball=$(echo "$line" | cut -d' ' -f4)
say "fetching $tarball ($(echo "$line" | cut -d' ' -f3) bytes) from $BASE"
fetch "$tarball"
check "$tarball" "$sum"
if [ $# -gt 0 ]; then
	set -f	# the members are tar's patterns, not the shell's
	# shellcheck disable=SC2046
	tar --no-same-owner -xf "$TMP/$tarball" -C "$TMP/tree" --strip-components=1 --wildcards \
		$(for m; do printf '*/%s ' "$m"; done) || { say "unpacking $tarball failed"; exit 1; }
	set +f
else
	tar --no-same-owner -xf "$TMP/$tarball" -C "$TMP/tree" --strip-components=1 ||
		{ say "unpacking $tarball failed"; exit 1; }
fi
printf 'package=%s\nversion=%s\ntarball=%s\nsha256=%s\n' "$PKG" "$VER" "$tarball" "$sum" >"$TMP/tree/.crun-source"
rm -rf "$TREE"
mv -T "$TMP/tree" "$TREE"
say "unpacked $tarball into $TREE in $(( $(date +%s) - start )) s"
echo "$TREE"
