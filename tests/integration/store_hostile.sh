#!/bin/sh
# `crun store` under hostile clients: each scenario of
# tests/integration/py/store_hostile.py runs against a fresh store with a
# 64 MiB memory ceiling, while a well-behaved client keeps making round trips.
# The store must stay alive, its peak RSS (VmHWM) under the ceiling plus a
# fixed overhead, the good client's round trips fast, and each refusal must be
# logged naming the limit.
. "$(dirname "$0")/lib.sh"
# Under AddressSanitizer (make asan) freed memory sits in ASan's quarantine
# and counts in RSS; with none the RSS bound measures the store's own
# ceiling. Builds without ASan ignore the variable.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0"

MEM_MB=64
OVERHEAD_MB=${OVERHEAD_MB:-40}
PY="$TOP/tests/integration/py/store_hostile.py"
[ -x "$CRUN" ] || fail "no crun at $CRUN"

# Limits this suite sets. A crun without --max-output (an older build) still
# runs the scenarios with its own defaults, so that each fails on its merits.
LIMITS="--max-memory ${MEM_MB}M"
if "$CRUN" store --help | grep -q -- --max-output; then
	LIMITS="$LIMITS --max-value-size 4M --max-output 8M --idle-timeout 2"
fi

store_pid=""
stop_store() {
	[ -n "$store_pid" ] || return 0
	kill "$store_pid" 2>/dev/null
	wait "$store_pid" 2>/dev/null
	store_pid=""
}
at_exit stop_store

# start_store LOG: start a store on a kernel-chosen port; sets $port, $store_pid.
start_store() {
	# shellcheck disable=SC2086
	"$CRUN" store --host 127.0.0.1 --port 0 $LIMITS >"$1" 2>&1 &
	store_pid=$!
	wait_for 10 grep -q "listening on" "$1" || fail "store did not start: $(cat "$1")"
	port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$1" | head -n 1)
	[ -n "$port" ] || fail "no port in $(cat "$1")"
}

# scenario NAME [LOG-PATTERN]: run one attack on a fresh store.
scenario() {
	log="$T/$1.log"
	start_store "$log"
	"$PYTHON" "$PY" "$port" "$store_pid" $((MEM_MB + OVERHEAD_MB)) "$1" ||
		{ echo "--- store log:" >&2; tail -n 5 "$log" >&2; fail "scenario $1"; }
	kill -0 "$store_pid" 2>/dev/null || fail "$1: store died"
	stop_store
	if [ -n "${2:-}" ]; then
		expect_grep "$1: refusal logged" "$2" "$log"
	fi
}

start=$(date +%s)
scenario pipelined_gets
scenario multi_get_fanout "closing connection from 127.0.0.1.*exceeds max-output"
scenario list_keys
scenario watch "watch notifications would pass its share of max-output"
scenario partial_frames "partial request would pass max-memory"
scenario parked_waits "wait refused: it would pass max-memory"
scenario sigpipe
scenario queue_wakeups
scenario incremental
scenario wrong_magic "validate with a wrong magic 0x12345678"
scenario idle "no progress for idle-timeout 2 s with a partial request"

# A non-reading client under a low ceiling, max-output at its
# default (64M, past the ceiling): its share of max-memory bounds it.
LIMITS="--max-memory 16M" MEM_MB=16
scenario unread_share

# The hash key is per process: two stores order the same keys differently.
start_store "$T/h1.log"
pid1=$store_pid port1=$port
start_store "$T/h2.log"
"$PYTHON" "$PY" "$port1" "$pid1" 0 hash_order "$port" || fail "hash_order"
stop_store
kill "$pid1" 2>/dev/null
wait "$pid1" 2>/dev/null

note "store_hostile: all scenarios passed in $(($(date +%s) - start)) s"
