#!/bin/sh
# Run every test: the Criterion unit binaries, then each integration script.
# A script exits 0 (pass), 77 (skipped: it printed why) or anything else (fail).
# TESTS="pattern" runs only the matching ones.
BUILD=${BUILD:-build}
export BUILD
export CRUN="$PWD/$BUILD/crun"
export PYTHON="${PYTHON:-/usr/bin/python3}"
pass=0 fail=0 skip=0 failed=""
match() { [ -z "${TESTS:-}" ] && return 0; case "$1" in *$TESTS*) return 0;; esac; return 1; }

for t in "$BUILD"/tests/test_*; do
	case "$t" in *.d) continue ;; esac
	[ -x "$t" ] || continue
	match "$t" || continue
	echo "== unit $(basename "$t")"
	if "$t" --jobs=2 --timeout=60 --short-filename; then pass=$((pass+1)); else fail=$((fail+1)); failed="$failed $(basename "$t")"; fi
done

for t in tests/integration/*.sh; do
	[ -f "$t" ] || continue
	case "$(basename "$t")" in lib*.sh) continue ;; esac
	match "$t" || continue
	echo "== integration $(basename "$t" .sh)"
	start=$(date +%s)
	sh "$t"; rc=$?
	el=$(( $(date +%s) - start ))
	case $rc in
	0) pass=$((pass+1)); echo "   ok ($el s)" ;;
	77) skip=$((skip+1)); echo "   skipped" ;;
	*) fail=$((fail+1)); failed="$failed $(basename "$t")"; echo "   FAILED (status $rc, $el s)" ;;
	esac
done

echo "== $pass passed, $skip skipped, $fail failed${failed:+:$failed}"
[ "$fail" -eq 0 ]
