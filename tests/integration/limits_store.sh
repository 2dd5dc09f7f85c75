#!/bin/sh
# The store limits' options reach the stores that enforce them: `crun store`
# with --max-key-size / --max-value-size, and the agent's workers' store with
# --store_max_key_size / --store_max_value_size (what a worker reaches at
# MASTER_ADDR:MASTER_PORT). At each: a key and a value of exactly the limit
# are served, one byte more closes that connection (logged naming the limit
# where the store logs), and the first client is served throughout
# (tests/integration/py/limits_probe.py). The edges themselves are pinned
# in tests/unit/test_limits_store.c; this is the plumbing.
. "$(dirname "$0")/lib.sh"
PROBE="$TOP/tests/integration/py/limits_probe.py"

# `crun store`, limits set by its flags.
"$CRUN" store --host 127.0.0.1 --port 0 --max-key-size 16 --max-value-size 100 \
	>"$T/store.log" 2>&1 &
store=$!
at_exit "kill $store"
wait_for 10 grep -q "listening on .*:[0-9][0-9]*$" "$T/store.log" || fail "store did not start: $(cat "$T/store.log")"
port=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$T/store.log" | head -n 1)
[ -n "$port" ] || fail "no port in: $(cat "$T/store.log")"
"$PYTHON" "$PROBE" 127.0.0.1 "$port" 16 100 >"$T/probe.out" 2>&1 ||
	fail "crun store: $(cat "$T/probe.out")"
note "crun store --max-key-size 16 --max-value-size 100: $(tr '\n' ';' <"$T/probe.out")"
wait_for 10 grep -q "key of 17 bytes exceeds the limit of 16" "$T/store.log" ||
	fail "no refusal naming the key limit: $(cat "$T/store.log")"
wait_for 10 grep -q "value of 101 bytes exceeds the limit of 100" "$T/store.log" ||
	fail "no refusal naming the value limit: $(cat "$T/store.log")"
kill "$store"
wait_pid 10 "$store" "$T/store.log"

# The agent's workers' store, limits set by crun's options; the worker
# probes it and its exit status is crun's.
"$CRUN" --standalone --nproc_per_node=1 --store_max_key_size=32 \
	--store_max_value_size=4K "$PYTHON" -c '
import os, subprocess, sys
sys.exit(subprocess.call([sys.argv[1], sys.argv[2], os.environ["MASTER_ADDR"],
                          os.environ["MASTER_PORT"], "32", "4096"]))
' "$PYTHON" "$PROBE" >"$T/agent.out" 2>&1 &
agent=$!
wait_pid 60 "$agent" "$T/agent.out" || fail "the worker's probe failed: $(cat "$T/agent.out")"
expect_grep "the probe's last check" "the first connection: still served" "$T/agent.out"
note "crun --store_max_key_size=32 --store_max_value_size=4K: the workers' store held them"
