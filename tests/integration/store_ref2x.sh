#!/bin/sh
# `crun store` against an independent PyTorch 2.x client.
# tests/integration/py/tcpstore2_ref.py is written from PyTorch's own TCPStore
# sources (TCPStore.cpp, TCPStoreBackend.hpp, TCPStoreLibUvBackend.cpp; each
# encoding cites its file and function), not from crun's src/store/store_wire.c, so
# an opcode or reply error shared by crun's client and server fails here. It
# covers VALIDATE + PING, every opcode with the results PyTorch's libuv server
# defines, WAIT/CANCEL_WAIT races, blocking queue pops woken oldest first, and
# requests split into 1-byte fragments. Python standard library only.
. "$(dirname "$0")/lib.sh"

PY="$TOP/tests/integration/py/tcpstore2_ref.py"
[ -x "$CRUN" ] || fail "no crun at $CRUN (build first)"

store_pid=""
stop_store() {
	[ -n "$store_pid" ] || return 0
	kill "$store_pid" 2>/dev/null
	wait "$store_pid" 2>/dev/null
	store_pid=""
}
at_exit stop_store

log="$T/store.log"
"$CRUN" store --host 127.0.0.1 --port 0 >"$log" 2>&1 &
store_pid=$!
wait_for 10 grep -q "listening on" "$log" || fail "store did not start: $(cat "$log")"
port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$log" | head -n 1)
[ -n "$port" ] || fail "no port in $(cat "$log")"

# The client bounds every read itself (5 s per reply); timeout(1) bounds the
# whole run in case a write blocks.
start=$(date +%s)
timeout 60 "$PYTHON" "$PY" "$port" >"$T/ref.out" 2>&1
rc=$?
cat "$T/ref.out"
if [ "$rc" -ne 0 ]; then
	echo "--- store log:" >&2
	tail -n 10 "$log" >&2
	fail "crun store differs from PyTorch 2.x (exit $rc): $(grep MISMATCH "$T/ref.out" || tail -n 1 "$T/ref.out")"
fi
kill -0 "$store_pid" 2>/dev/null || fail "store died during the run"
expect_grep "every step ran" "^all [0-9]* steps match PyTorch 2.x" "$T/ref.out"
stop_store
note "store_ref2x: $(( $(date +%s) - start ))s"
echo "ok store_ref2x"
