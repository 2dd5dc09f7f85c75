# Sourced by scripts/wheel.sh and scripts/windows.sh: compile the libraries
# every run of crun uses (libuv, inih, jansson, libsodium) into static
# archives for another target, from Debian's source packages of them
# (scripts/debian-source.sh: each tarball checked against its .dsc, whose
# SHA-256 is pinned here).
#
# Needs: CC and AR (the target's), DEP_OPT (their compile flags), D (the
# folder that gets include/ and lib/lib{uv,inih,jansson,sodium}.a),
# DEP_OS (linux or windows) and say(). A change to this file or to the
# sourcing script should name a new D: nothing here is rebuilt when the
# archive is there.

src() { sh scripts/debian-source.sh "$@"; }
UV=$(src libuv1 1.44.2-1+deb12u1 798be0a2bcbcd40bb85302f6ccbf02b240e1958d4ad9cf153b8101c3a82f21b9)
INIH=$(src libinih 59-1 ec3334b0ad6a817e84b0bfa7599097536f8433c7fc36f82561dc9c4930fe9779)
JANSSON=$(src jansson 2.14-2 6296ddd9c0a022bd1b70074aefb171cfcdf5694a04ffd32b35fd66097621af87)
SODIUM=$(src libsodium 1.0.18-1+deb12u1 2c23c57b5a9385dab5a1916014c9b5f2cdd7dadeb8a35b28c1bfb603ce7095c4)

mkdir -p "$D/include" "$D/lib" "$D/obj"
# lib NAME CFLAGS -- FILE...: compile FILEs (two at a time) into libNAME.a.
lib() {
	_n=$1; shift
	_f=""
	while [ "$1" != -- ]; do _f="$_f $1"; shift; done
	shift
	[ -f "$D/lib/lib$_n.a" ] && return 0
	say "compiling $_n for $DEP_OS ($# files)"
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

# jansson: what its configure finds on any glibc, or on mingw-w64 (where
# the hash seed comes from the Windows crypto API).
sed -e 's/@json_inline@/inline/' -e 's/@json_have_long_long@/1/' \
	-e 's/@json_have_localeconv@/1/' -e 's/@json_have_atomic_builtins@/1/' \
	-e 's/@json_have_sync_builtins@/1/' "$JANSSON/src/jansson_config.h.in" >"$D/include/jansson_config.h"
cp "$JANSSON/src/jansson.h" "$D/include/"
case $DEP_OS in
windows) JDEFS="HAVE_STDINT_H HAVE_FCNTL_H HAVE_UNISTD_H HAVE_SYS_TIME_H HAVE_SYS_TYPES_H
HAVE_SYS_STAT_H HAVE_GETTIMEOFDAY HAVE_LOCALECONV HAVE_ATOMIC_BUILTINS HAVE_SYNC_BUILTINS
USE_WINDOWS_CRYPTOAPI" ;;
*) JDEFS="HAVE_STDINT_H HAVE_FCNTL_H HAVE_UNISTD_H HAVE_SYS_TIME_H HAVE_SYS_TYPES_H
HAVE_SYS_STAT_H HAVE_SCHED_H HAVE_GETTIMEOFDAY HAVE_GETPID HAVE_SCHED_YIELD HAVE_OPEN
HAVE_READ HAVE_CLOSE HAVE_LOCALECONV HAVE_ATOMIC_BUILTINS HAVE_SYNC_BUILTINS USE_URANDOM" ;;
esac
for d in $JDEFS; do echo "#define $d 1"; done >"$D/include/jansson_private_config.h"
echo "#define INITIAL_HASHTABLE_ORDER 3" >>"$D/include/jansson_private_config.h"
# shellcheck disable=SC2046,SC2086
lib jansson -DHAVE_CONFIG_H -I"$D/include" -- $(ls "$JANSSON"/src/*.c | LC_ALL=C sort)

# libuv: the files its Makefile.am builds on Linux, or on Windows.
cp -R "$UV/include/." "$D/include/"
UVS="fs-poll idna inet random strscpy strtok threadpool timer uv-data-getter-setters uv-common version"
case $DEP_OS in
windows)
	UVS="$UVS win/async win/core win/detect-wakeup win/dl win/error win/fs-event win/fs
win/getaddrinfo win/getnameinfo win/handle win/loop-watcher win/pipe win/poll win/process-stdio
win/process win/signal win/snprintf win/stream win/tcp win/thread win/tty win/udp win/util
win/winapi win/winsock"
	UVDEFS="-DWIN32_LEAN_AND_MEAN -D_WIN32_WINNT=0x0602" ;;
*)
	UVS="$UVS unix/async unix/core unix/dl unix/fs unix/getaddrinfo unix/getnameinfo
unix/loop-watcher unix/loop unix/pipe unix/poll unix/process unix/random-devurandom unix/signal
unix/stream unix/tcp unix/thread unix/tty unix/udp unix/linux-core unix/linux-inotify
unix/linux-syscalls unix/procfs-exepath unix/proctitle unix/random-getrandom
unix/random-sysctl-linux unix/epoll"
	UVDEFS="-D_GNU_SOURCE -D_FILE_OFFSET_BITS=64 -D_LARGEFILE_SOURCE" ;;
esac
# shellcheck disable=SC2046,SC2086
lib uv $UVDEFS -I"$UV/include" -I"$UV/src" -- $(for f in $UVS; do echo "$UV/src/$f.c"; done)

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
SDEFS="-DCONFIGURED=1 -DHAVE_INLINE_ASM=0 -DHAVE_C_VARARRAYS=1 -DHAVE_ATOMIC_OPS=1
-DNATIVE_LITTLE_ENDIAN=1"
case $DEP_OS in
windows) SDEFS="$SDEFS -DSODIUM_STATIC=1 -DHAVE_WINCRYPT_H=1" ;;
*) SDEFS="$SDEFS -DHAVE_SYS_MMAN_H=1 -DHAVE_MMAP=1 -DHAVE_MPROTECT=1 -DHAVE_POSIX_MEMALIGN=1
-DHAVE_NANOSLEEP=1 -DHAVE_SYSCONF=1 -DHAVE_PTHREAD=1 -DHAVE_WEAK_SYMBOLS=1" ;;
esac
# shellcheck disable=SC2046,SC2086
lib sodium $SDEFS -I"$D/include/sodium" -I"$D/include" -Wno-unused-function -Wno-unknown-pragmas -- \
	$(find "$SODIUM/src/libsodium" -name '*.c' | LC_ALL=C sort)
