#!/bin/sh
# Build the wheel that puts crun on PATH in any virtual environment:
#
#   scripts/wheel.sh ARCH        ARCH: x86_64 or aarch64 (cross-compiled)
#
# gives dist/crun_launcher-VERSION-py3-none-manylinux_2_28_ARCH.whl. crun is
# compiled with zig's C compiler for ARCH-linux-gnu.2.28 (PyPI's ziglang,
# pinned in scripts/requirements-wheel.txt, in build-wheel/venv/), so the
# binary runs on glibc 2.28 and newer: RHEL/Rocky 8, Ubuntu 20.04, Debian 10
# on. libuv, inih, jansson and libsodium go in statically, compiled here from
# Debian's source packages of them (scripts/static-deps.sh); libcurl,
# libmicrohttpd and libhwloc stay opened at run time where present, as in
# every build (their headers only are needed, the build host's). The wheel
# is put together by scripts/wheel.py and checked by `auditwheel show`, which
# must name the tag claimed. Two builds of one commit give the same bytes:
# paths are mapped away, the zip's times are the commit's.
set -eu

ARCH=${1:-x86_64}
case $ARCH in x86_64|aarch64) ;; *) echo "usage: $0 x86_64|aarch64" >&2; exit 2 ;; esac
TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
VERSION=$(sed -n 's/^VERSION = //p' Makefile)
GLIBC=2.28
TAG=manylinux_$(echo $GLIBC | tr . _)_$ARCH
W=$TOP/build-wheel
B=$W/$ARCH
say() { echo "wheel: $*" >&2; }

# The tools: zig's C compiler and auditwheel, pinned, in a venv of their own.
# WHEEL_VENV names another such venv to use.
REQ=scripts/requirements-wheel.txt
V=${WHEEL_VENV:-$W/venv}
if ! cmp -s "$REQ" "$V/.req" 2>/dev/null; then
	say "making $V ($REQ)"
	rm -rf "$V"
	python3 -m venv "$V"
	"$V/bin/python" -m pip install -q --no-deps --disable-pip-version-check -r "$REQ"
	cp "$REQ" "$V/.req"
fi
export ZIG_GLOBAL_CACHE_DIR="$W/zig-cache" ZIG_LOCAL_CACHE_DIR="$W/zig-cache"
CC="$V/bin/python -m ziglang cc -target $ARCH-linux-gnu.$GLIBC"
AR="$V/bin/python -m ziglang ar"
# The compiler sees the sources under these fixed names, not where they lie.
MAP="-ffile-prefix-map=$TOP=. -ffile-prefix-map=${CRUN_SOURCES:-/var/cache/crun-sources}=/src"
DEP_OPT="-O2 -fPIC -fno-strict-aliasing $MAP"

# libuv, inih, jansson and libsodium for ARCH (a change to this script,
# its tools or scripts/static-deps.sh builds them anew).
DEP_OS=linux
D=$B/deps-$(cat "$0" "$REQ" scripts/static-deps.sh | sha256sum | cut -c1-8)
. scripts/static-deps.sh

# crun's own build, cross: the headers of the libraries it opens at run time
# are the host's (declarations only).
H=$B/hdr
rm -rf "$H"; mkdir -p "$H"
# Debian splits some between /usr/include and its multiarch folder: merged.
for h in curl microhttpd.h hwloc hwloc.h; do
	found=""
	for p in /usr/include/$h /usr/include/*-linux-gnu/$h; do
		[ -e "$p" ] || continue
		cp -R "$p" "$H/"
		found=1
	done
	[ -n "$found" ] || { say "no $h under /usr/include (scripts/install-deps.sh installs it)"; exit 1; }
done
say "compiling crun $VERSION for $ARCH (glibc $GLIBC)"
# (not a sanitizer build's settings, when make test runs under make asan)
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j2 BUILD="$B/crun" CC="$CC" AR="$AR" \
	SANITIZE= CFLAGS= OPT="-O2 $MAP" \
	DEP_CFLAGS="-I$D/include -I$H" LDFLAGS="-s -Wl,--build-id=sha1" \
	BIN_LIBS="$D/lib/libuv.a $D/lib/libinih.a $D/lib/libjansson.a $D/lib/libsodium.a -pthread -ldl" \
	"$B/crun/crun"

mkdir -p dist
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}
export SOURCE_DATE_EPOCH
WHL=$("$V/bin/python" scripts/wheel.py "$B/crun/crun" "$VERSION" "$TAG" dist)
show=$("$V/bin/python" -m auditwheel show "$WHL" 2>&1) || { echo "$show" >&2; exit 1; }
echo "$show" | tr '\n' ' ' | grep -q "\"$TAG\"" ||
	{ echo "$show" >&2; say "auditwheel does not name $TAG for $WHL"; exit 1; }
say "$WHL ($(wc -c <"$WHL") bytes, crun $(wc -c <"$B/crun/crun") bytes): auditwheel: $TAG"
echo "$WHL"
