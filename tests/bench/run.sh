#!/bin/sh
# `make bench`: run every tests/bench/*_bench.sh in turn (store_bench.sh,
# agent_bench.sh, ...). Each gets BUILD and PYTHON in its environment and exits
# 0 when it measured what it should. BENCH="pattern" runs only the matching
# ones. The exit status is non-zero if any of them failed.
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
export BUILD PYTHON
dir=$(dirname "$0")
ran=0 failed=""

for b in "$dir"/*_bench.sh; do
	[ -f "$b" ] || continue
	name=$(basename "$b" .sh)
	if [ -n "${BENCH:-}" ]; then
		case "$name" in *$BENCH*) ;; *) continue ;; esac
	fi
	echo "=== bench $name"
	start=$(date +%s)
	sh "$b"
	rc=$?
	echo "=== bench $name: status $rc ($(($(date +%s) - start)) s)"
	ran=$((ran + 1))
	[ $rc -eq 0 ] || failed="$failed $name"
done

echo "=== $ran bench script(s) run${failed:+, failed:$failed}"
[ -z "$failed" ]
