#!/bin/sh
# needs: torch
# The crun store against real PyTorch (run on 1.13, G0, and 2.x, G3+):
#  (a) torch's TCPStore client runs the store transcript against `crun store`;
#  (b) libcrun's C client (build/tests/store_cli, torch's generation) runs it against torch's
#      own TCPStore(is_master=True) server;
#  both must equal (c) torch's client against torch's server, line for line,
#  including a wait timeout and compare_set on a missing key;
#  (d) two gloo ranks form a process group through `crun store` in agent-store
#      mode (TORCHELASTIC_USE_AGENT_STORE=True) and all_reduce.
. tests/integration/lib.sh
need_torch
PY=$TOP/tests/integration/py
STORE_CLI=$TOP/$BUILD/tests/store_cli
[ -x "$CRUN" ] || fail "no $CRUN (build first)"
[ -x "$STORE_CLI" ] || fail "no $STORE_CLI (build first)"

# start_crun_store: run `crun store` on a fresh port; sets CP.
start_crun_store() {
	CP=$(free_port)
	"$CRUN" store --port "$CP" --host 127.0.0.1 2>"$T/crun-store-$CP.log" &
	_pid=$!
	at_exit "kill $_pid"
	wait_for 10 grep -q "listening on" "$T/crun-store-$CP.log" ||
		fail "crun store did not start: $(cat "$T/crun-store-$CP.log")"
}

# start_torch_store: run PyTorch's server on a fresh port; sets TP.
start_torch_store() {
	TP=$(free_port)
	"$PYTHON" "$PY/store_server.py" "$TP" >"$T/torch-store-$TP.log" 2>&1 &
	_pid=$!
	at_exit "kill $_pid"
	wait_for 20 grep -q "server up" "$T/torch-store-$TP.log" ||
		fail "torch store did not start: $(cat "$T/torch-store-$TP.log")"
}

# (c) the reference: torch against torch.
start_torch_store
"$PYTHON" "$PY/store_ops.py" "$TP" >"$T/ref.txt" 2>"$T/ref.err" ||
	fail "torch client vs torch server: $(tail -n 5 "$T/ref.err")"
expect_grep "reference transcript" "^done" "$T/ref.txt"
expect_grep "reference wait timeout" "^wait never timeout 0.5" "$T/ref.txt"

# (a) torch's client against crun store.
start_crun_store
"$PYTHON" "$PY/store_ops.py" "$CP" >"$T/a.txt" 2>"$T/a.err" ||
	fail "torch client vs crun store: $(tail -n 5 "$T/a.err")"
diff -u "$T/ref.txt" "$T/a.txt" >&2 || fail "torch client: crun store differs from torch's server"
note "torch client vs crun store: same $(wc -l <"$T/a.txt") results as vs torch's server"

# (b) libcrun's C client against torch's server, speaking that server's
# generation: G0 to 1.13, G3 (VALIDATE first) to 2.x, which drops a G0 client.
GEN=--g0 GEN_NAME=g0
"$PYTHON" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' && GEN= GEN_NAME=g3
start_torch_store
timeout 60 "$STORE_CLI" $GEN 127.0.0.1 "$TP" >"$T/b.txt" 2>"$T/b.err" ||
	fail "store_cli ($GEN_NAME) vs torch server: $(tail -n 5 "$T/b.err")"
diff -u "$T/ref.txt" "$T/b.txt" >&2 || fail "libcrun client ($GEN_NAME) against torch's server differs"
note "libcrun client ($GEN_NAME) vs torch server: same results"

# The same C client, G3 and G0, against crun store.
start_crun_store
timeout 60 "$STORE_CLI" 127.0.0.1 "$CP" >"$T/c3.txt" 2>"$T/c3.err" ||
	fail "store_cli (g3) vs crun store: $(tail -n 5 "$T/c3.err")"
diff -u "$T/ref.txt" "$T/c3.txt" >&2 || fail "libcrun client (g3) against crun store differs"
start_crun_store
timeout 60 "$STORE_CLI" --g0 127.0.0.1 "$CP" >"$T/c0.txt" 2>"$T/c0.err" ||
	fail "store_cli (g0) vs crun store: $(tail -n 5 "$T/c0.err")"
diff -u "$T/ref.txt" "$T/c0.txt" >&2 || fail "libcrun client (g0) against crun store differs"
note "libcrun client (g3, g0) vs crun store: same results"

# (d) gloo in agent-store mode, workers started by hand.
start_crun_store
for r in 0 1; do
	RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$CP \
	TORCHELASTIC_USE_AGENT_STORE=True TORCHELASTIC_RESTART_COUNT=0 \
		timeout 120 "$PYTHON" "$PY/gloo_allreduce.py" >"$T/gloo$r.log" 2>&1 &
	eval "g$r=\$!"
done
wait "$g0" || { cat "$T/gloo0.log" >&2; fail "gloo rank 0 failed"; }
wait "$g1" || { cat "$T/gloo1.log" >&2; fail "gloo rank 1 failed"; }
expect_grep "rank 0 all_reduce" "all_reduce -> \[3.0, 3.0, 3.0, 3.0\]" "$T/gloo0.log"
expect_grep "rank 1 all_reduce" "all_reduce -> \[3.0, 3.0, 3.0, 3.0\]" "$T/gloo1.log"
expect_nogrep "no connection closed for a reason" "closing connection" "$T/crun-store-$CP.log"
note "gloo all_reduce through crun store (agent-store mode): ok"
exit 0
