#!/bin/sh
# `make coverage`: line and branch coverage of src/, agent/ and launcher/
# under the whole test run (tests/run.sh on the --coverage build in
# $BUILD, default build-cov), with floors the target enforces:
# COV_LINES (default 85) % of lines and COV_BRANCHES (default 70) % of
# branches. An HTML report goes to $BUILD/coverage/index.html. Needs lcov.
set -u
BUILD=${BUILD:-build-cov}
COV_LINES=${COV_LINES:-85}
COV_BRANCHES=${COV_BRANCHES:-70}
RC="--rc lcov_branch_coverage=1"
command -v lcov >/dev/null 2>&1 || { echo "coverage: lcov is not installed (scripts/install-deps.sh)" >&2; exit 2; }
lcov -q $RC --zerocounters --directory "$BUILD" || exit 2
BUILD=$BUILD TEST_LDFLAGS=--coverage sh tests/run.sh; tests_rc=$?
lcov -q $RC --capture --directory "$BUILD" --base-directory . --output-file "$BUILD/all.info" 2>"$BUILD/lcov.err" ||
	{ cat "$BUILD/lcov.err" >&2; exit 2; }
lcov -q $RC --extract "$BUILD/all.info" "$PWD/src/*" "$PWD/agent/*" "$PWD/launcher/*" \
	--output-file "$BUILD/crun.info" || exit 2
genhtml -q $RC --output-directory "$BUILD/coverage" "$BUILD/crun.info" >/dev/null 2>&1
lcov $RC --list "$BUILD/crun.info" 2>/dev/null | tail -n +1 >"$BUILD/per-file.txt"
sum=$(lcov $RC --summary "$BUILD/crun.info" 2>&1)
echo "$sum" | grep -E "lines|branches"
pct() { echo "$sum" | sed -n "s/^ *$1\.*: \([0-9.]*\)%.*/\1/p"; }
lines=$(pct lines) branches=$(pct branches)
echo "coverage of src/ agent/ launcher/: lines $lines% (floor $COV_LINES%), branches $branches% (floor $COV_BRANCHES%); per file: $BUILD/per-file.txt, html: $BUILD/coverage/index.html"
ok=1
awk "BEGIN{exit !($lines >= $COV_LINES)}" || { echo "coverage: lines $lines% below the floor $COV_LINES%"; ok=0; }
awk "BEGIN{exit !($branches >= $COV_BRANCHES)}" || { echo "coverage: branches $branches% below the floor $COV_BRANCHES%"; ok=0; }
[ "$tests_rc" = 0 ] || { echo "coverage: the tests failed (status $tests_rc)"; ok=0; }
[ $ok = 1 ]
