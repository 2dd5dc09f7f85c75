#!/bin/sh
# Build crun for Windows (x86_64):
#
#   scripts/windows.sh          gives build-win/crun.exe and
#                               dist/crun_launcher-VERSION-py3-none-win_amd64.whl
#
# and build-win/store_cli.exe and fake_worker.exe, the test helpers
# (tests/helpers/).
#
# Cross-compiled with Debian's mingw-w64 (gcc-mingw-w64-x86-64, which
# scripts/install-deps.sh installs), everything static: libuv, inih,
# jansson and libsodium are compiled here from Debian's source packages
# (scripts/static-deps.sh), and mingw's own runtime (libgcc, winpthreads)
# goes in too, so crun.exe needs nothing but Windows' system DLLs. The
# Makefile builds the files that build on Windows (WIN_SRC there).
set -eu

TOP=$(cd "$(dirname "$0")/.." && pwd)
cd "$TOP"
TRIPLE=x86_64-w64-mingw32
W=$TOP/build-win
say() { echo "windows: $*" >&2; }

command -v $TRIPLE-gcc >/dev/null 2>&1 ||
	{ say "no $TRIPLE-gcc (scripts/install-deps.sh installs gcc-mingw-w64-x86-64)"; exit 1; }
# Debian's mingw-w64 comes with two thread models: the posix one (with
# winpthreads, which C11 code and libgcc's atomics may use) is the one
# asked for by name.
CC=$TRIPLE-gcc
command -v $TRIPLE-gcc-posix >/dev/null 2>&1 && CC=$TRIPLE-gcc-posix
AR=$TRIPLE-ar
MAP="-ffile-prefix-map=$TOP=. -ffile-prefix-map=${CRUN_SOURCES:-/var/cache/crun-sources}=/src"
DEP_OPT="-O2 -fno-strict-aliasing $MAP"

# (a change to this script or to scripts/static-deps.sh builds them anew)
DEP_OS=windows
D=$W/deps-$(cat "$0" scripts/static-deps.sh | sha256sum | cut -c1-8)
. scripts/static-deps.sh

# The headers of libcurl and libmicrohttpd, which crun opens at run time
# where they are there (the etcd backend, the metrics server): the build
# host's, declarations only.
H=$W/hdr
rm -rf "$H"; mkdir -p "$H"
for h in curl microhttpd.h; do
	for p in /usr/include/$h /usr/include/*-linux-gnu/$h; do
		[ -e "$p" ] && cp -R "$p" "$H/"
	done
	[ -e "$H/$h" ] || { say "no $h under /usr/include (scripts/install-deps.sh installs it)"; exit 1; }
done

say "compiling crun.exe"
# (not a sanitizer build's settings, when make test runs under make asan)
LIBS="$D/lib/libuv.a $D/lib/libinih.a $D/lib/libjansson.a $D/lib/libsodium.a"
LIBS="$LIBS -lpsapi -luser32 -ladvapi32 -liphlpapi -luserenv -lws2_32 -ldbghelp -lole32 -lshell32"
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s -j2 TARGET_OS=windows BUILD="$W/crun" \
	CC="$CC" AR="$AR" SANITIZE= CFLAGS= OPT="-O2 $MAP" \
	DEP_CFLAGS="-I$D/include -I$H -DSODIUM_STATIC=1" LDFLAGS="-static -s" \
	BIN_LIBS="$LIBS" DEP_LIBS="$LIBS" "$W/crun/crun.exe" "$W/crun/tests/store_cli.exe" \
	"$W/crun/tests/fake_worker.exe"
cp "$W/crun/crun.exe" "$W/crun/tests/store_cli.exe" "$W/crun/tests/fake_worker.exe" "$W/"
say "$W/crun.exe ($(wc -c <"$W/crun.exe") bytes)"

# The wheel for Windows: pip puts crun.exe in the environment's Scripts\.
VERSION=$(sed -n 's/^VERSION = //p' Makefile)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 315532800)}
export SOURCE_DATE_EPOCH
WHL=$(python3 scripts/wheel.py "$W/crun.exe" "$VERSION" win_amd64 dist)
say "$WHL ($(wc -c <"$WHL") bytes)"
