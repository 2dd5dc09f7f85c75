#!/bin/sh
# make install puts the binary, headers, library, man page and pkg-config
# file under DESTDIR/PREFIX, and a C program builds against them.
. tests/integration/lib.sh

make -s BUILD="$BUILD" install PREFIX=/usr/local DESTDIR="$T/root" >"$T/log" 2>&1 || { cat "$T/log"; fail "make install"; }
P="$T/root/usr/local"
for f in bin/crun lib/libcrun.a include/crun/store.h include/crun/rdzv.h \
	share/man/man1/crun.1 lib/pkgconfig/libcrun.pc; do
	[ -f "$P/$f" ] || fail "not installed: $f"
done
"$P/bin/crun" --version | grep -q '^crun ' || fail "installed crun does not run"
sed -i "s|^prefix=.*|prefix=$P|" "$P/lib/pkgconfig/libcrun.pc"
cat >"$T/prog.c" <<'C'
#include <crun/store.h>
#include <stdio.h>
int main(void)
{
	struct crun_store_limits lim;

	store_limits_default(&lim);
	printf("%zu\n", lim.max_key);
	return 0;
}
C
flags=$(PKG_CONFIG_PATH="$P/lib/pkgconfig" pkg-config --cflags --libs --static libcrun) || fail "pkg-config libcrun"
# A sanitizer build's library needs the sanitizer runtime too, a coverage
# build's (make coverage sets TEST_LDFLAGS=--coverage) the gcov runtime.
cc ${SANITIZE:+-fsanitize=$SANITIZE} ${TEST_LDFLAGS:-} -o "$T/prog" "$T/prog.c" $flags || fail "a program against the installed libcrun does not build"
expect_eq "program output" "$("$T/prog")" 8192
exit 0
