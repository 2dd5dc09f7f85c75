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
# Debian's source packages of them (scripts/debian-source.sh: each tarball
# checked against its .dsc, whose SHA-256 is pinned below); libcurl,
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

src() { sh scripts/debian-source.sh "$@"; }
UV=$(src libuv1 1.44.2-1+deb12u1 798be0a2bcbcd40bb85302f6ccbf02b240e1958d4ad9cf153b8101c3a82f21b9)
INIH=$(src libinih 59-1 ec3334b0ad6a817e84b0bfa7599097536f8433c7fc36f82561dc9c4930fe9779)
JANSSON=$(src jansson 2.14-2 6296ddd9c0a022bd1b70074aefb171cfcdf5694a04ffd32b35fd66097621af87)
SODIUM=$(src libsodium 1.0.18-1+deb12u1 2c23c57b5a9385dab5a1916014c9b5f2cdd7dadeb8a35b28c1bfb603ce7095c4)

# (a change to this script or its tools builds them anew)
D=$B/deps-$(cat "$0" "$REQ" | sha256sum | cut -c1-8)
mkdir -p "$D/include" "$D/lib" "$D/obj"
# lib NAME CFLAGS -- FILE...: compile FILEs (two at a time) into libNAME.a.
lib() {
	_n=$1; shift
	_f=""
	while [ "$1" != -- ]; do _f="$_f $1"; shift; done
	shift
	[ -f "$D/lib/lib$_n.a" ] && return 0
	say "compiling $_n for $ARCH ($# files)"
	rm -rf "$D/obj/$_n"; mkdir -p "$D/obj/$_n"
	# shellcheck disable=SC2086
	printf '%s\n' "$@" | xargs -P 2 -I{} sh -c \
		'o="$1/$(echo "$2" | tr / _).o"; exec '"$CC $DEP_OPT $_f"' -c "$2" -o "$o"' sh "$D/obj/$_n" {}
	(cd "$D/obj/$_n" && $AR rcs "$D/lib/lib$_n.a.tmp" $(ls | LC_ALL=C sort))
	mv "$D/lib/lib$_n.a.tmp" "$D/lib/lib$_n.a"
}

# inih, as Debian builds it (its meson defaults).
cp "$INIH/ini.h" "$D/include/"
lib inih -- "$INIH/ini.c"

# jansson: what its configure finds on any glibc.
sed -e 's/@json_inline@/inline/' -e 's/@json_have_long_long@/1/' \
	-e 's/@json_have_localeconv@/1/' -e 's/@json_have_atomic_builtins@/1/' \
	-e 's/@json_have_sync_builtins@/1/' "$JANSSON/src/jansson_config.h.in" >"$D/include/jansson_config.h"
cp "$JANSSON/src/jansson.h" "$D/include/"
for d in HAVE_STDINT_H HAVE_FCNTL_H HAVE_UNISTD_H HAVE_SYS_TIME_H HAVE_SYS_TYPES_H \
	HAVE_SYS_STAT_H HAVE_SCHED_H HAVE_GETTIMEOFDAY HAVE_GETPID HAVE_SCHED_YIELD HAVE_OPEN \
	HAVE_READ HAVE_CLOSE HAVE_LOCALECONV HAVE_ATOMIC_BUILTINS HAVE_SYNC_BUILTINS USE_URANDOM; do
	echo "#define $d 1"
done >"$D/include/jansson_private_config.h"
echo "#define INITIAL_HASHTABLE_ORDER 3" >>"$D/include/jansson_private_config.h"
# shellcheck disable=SC2046,SC2086
lib jansson -DHAVE_CONFIG_H -I"$D/include" -- $(ls "$JANSSON"/src/*.c | LC_ALL=C sort)

# libuv: the files its Makefile.am builds on Linux.
cp -R "$UV/include/." "$D/include/"
UVS="fs-poll idna inet random strscpy strtok threadpool timer uv-data-getter-setters uv-common version
unix/async unix/core unix/dl unix/fs unix/getaddrinfo unix/getnameinfo unix/loop-watcher
unix/loop unix/pipe unix/poll unix/process unix/random-devurandom unix/signal unix/stream
unix/tcp unix/thread unix/tty unix/udp unix/linux-core unix/linux-inotify unix/linux-syscalls
unix/procfs-exepath unix/proctitle unix/random-getrandom unix/random-sysctl-linux unix/epoll"
# shellcheck disable=SC2046
lib uv -D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -D_LARGEFILE_SOURCE -I"$UV/include" -I"$UV/src" -- \
	$(for f in $UVS; do echo "$UV/src/$f.c"; done)

# libsodium: its portable code (the SIMD variants need configure's checks and
# stay out; crun uses HMAC-SHA256, BLAKE2b and SipHash, all portable).
SI=$SODIUM/src/libsodium/include
sed -e 's/@VERSION@/1.0.18/' -e 's/@SODIUM_LIBRARY_VERSION_MAJOR@/10/' \
	-e 's/@SODIUM_LIBRARY_VERSION_MINOR@/3/' -e 's/@SODIUM_LIBRARY_MINIMAL_DEF@//' \
	"$SI/sodium/version.h.in" >"$D/include/sodium-version.h"
mkdir -p "$D/include/sodium"
cp -R "$SI/sodium.h" "$D/include/"
cp -R "$SI/sodium/." "$D/include/sodium/"
cp "$D/include/sodium-version.h" "$D/include/sodium/version.h"
SDEFS="-DCONFIGURED=1 -DHAVE_INLINE_ASM=0 -DHAVE_C_VARARRAYS=1 -DHAVE_SYS_MMAN_H=1 -DHAVE_MMAP=1
-DHAVE_MPROTECT=1 -DHAVE_POSIX_MEMALIGN=1 -DHAVE_NANOSLEEP=1 -DHAVE_SYSCONF=1 -DHAVE_PTHREAD=1
-DHAVE_WEAK_SYMBOLS=1 -DHAVE_ATOMIC_OPS=1 -DNATIVE_LITTLE_ENDIAN=1"
# shellcheck disable=SC2046,SC2086
lib sodium $SDEFS -I"$D/include/sodium" -I"$D/include" -Wno-unused-function -Wno-unknown-pragmas -- \
	$(find "$SODIUM/src/libsodium" -name '*.c' | LC_ALL=C sort)

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
