#!/bin/sh
# Settings torchrun users pass that crun once accepted and ignored, each now
# honoured: rdzv_conf heartbeat_timeout (how long a heartbeat may go
# unanswered), read_timeout (how long a node tries to reach the rendezvous
# host), timeout (the static backend's wait for every node; c10d says it
# ignores it), TORCH_ELASTIC_SHUTDOWN_TIMEOUT, and the tee prefix template
# TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE.
. tests/integration/lib.sh

# elapsed_ms OUT CMD...: run CMD (output to OUT), print its status and wall
# time in ms.
elapsed_ms() {
	_o=$1; shift
	_s=$(date +%s%N); "$@" >"$_o" 2>&1; _rc=$?; _e=$(date +%s%N)
	echo "$_rc $(( (_e - _s) / 1000000 ))"
}

# --- read_timeout: a node that cannot reach the host gives up after it ----
PORT=$(free_port) # nothing listens there
set -- $(elapsed_ms "$T/rt.out" timeout 30 "$CRUN" --nnodes=2 --rdzv_backend=c10d \
	--rdzv_endpoint=127.0.0.1:$PORT --rdzv_conf=is_host=false,read_timeout=1 "$FAKE_WORKER" exit 0)
expect_eq "read_timeout: exit status" "$1" 1
expect_grep "read_timeout: named" "could not reach the rendezvous host .* within 1 s" "$T/rt.out"
[ "$2" -lt 10000 ] || fail "read_timeout=1 took $2 ms (the join deadline is 600 s)"

# --- timeout: the static backend's wait for every node -------------------
PORT=$(free_port)
set -- $(elapsed_ms "$T/st.out" timeout 30 "$CRUN" --nnodes=2 --node_rank=0 --master_addr=127.0.0.1 \
	--master_port=$PORT --rdzv_conf=timeout=1 "$FAKE_WORKER" exit 0)
expect_eq "static timeout: exit status" "$1" 1
expect_grep "static timeout: named" "timed out after 1 s" "$T/st.out"
[ "$2" -lt 10000 ] || fail "static timeout=1 took $2 ms"
# c10d: torchrun ignores it too; crun says so instead of silently.
PORT=$(free_port)
timeout 30 "$CRUN" --nnodes=1:2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_conf=timeout=5,last_call_timeout=0.1 "$FAKE_WORKER" exit 0 >"$T/ct.out" 2>&1 ||
	fail "c10d with timeout= failed: $(cat "$T/ct.out")"
expect_grep "c10d says timeout is not its setting" "rdzv_conf timeout is for the static and etcd backends" "$T/ct.out"

# --- heartbeat_timeout: a stopped store host is declared lost after it ----
# hb_run SECONDS|"": a 2-node job whose store host is SIGSTOPped mid-run;
# prints how long the other node waited, from its message.
hb_run() {
	PORT=$(free_port)
	conf=last_call_timeout=0.1
	[ -n "$1" ] && conf="$conf,heartbeat_timeout=$1"
	"$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=hb$$ \
		--rdzv_conf=$conf "$FAKE_WORKER" pid "$T/hbpids" hang >"$T/hbh.out" 2>&1 &
	host=$!
	wait_for 10 listening "$PORT" || fail "no store host"
	timeout 40 "$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=hb$$ \
		--rdzv_conf=$conf "$FAKE_WORKER" pid "$T/hbpids" hang >"$T/hbc.out" 2>&1 &
	cl=$!
	wait_for 20 sh -c "[ \$(cat '$T/hbpids' 2>/dev/null | wc -l) -ge 2 ]" || fail "workers never started"
	kill -STOP $host
	wait $cl
	kill -KILL $host; kill -CONT $host 2>/dev/null; wait $host 2>/dev/null
	rm -f "$T/hbpids"
	sed -n 's/.*no reply from the rendezvous store for \([0-9.]*\) s.*/\1/p' "$T/hbc.out" | head -n 1
}
d=$(hb_run "")
[ -n "$d" ] || { cat "$T/hbc.out"; fail "default: the stopped host was not declared lost by heartbeat"; }
awk "BEGIN{exit !($d >= 1.5 && $d < 3)}" || fail "default heartbeat limit: waited $d s, want 1.5-3"
d=$(hb_run 3.5)
[ -n "$d" ] || { cat "$T/hbc.out"; fail "heartbeat_timeout=3.5: the stopped host was not declared lost"; }
awk "BEGIN{exit !($d >= 3.5 && $d < 6)}" || fail "heartbeat_timeout=3.5: waited $d s"

# --- TORCH_ELASTIC_SHUTDOWN_TIMEOUT (below PET_SHUTDOWN_TIMEOUT and the flag)
TORCH_ELASTIC_SHUTDOWN_TIMEOUT=7 "$CRUN" --standalone --print-config /bin/true >"$T/pc"
expect_grep "torchrun's variable read" "^shutdown_timeout *= 7 .*# environment (TORCH_ELASTIC_SHUTDOWN_TIMEOUT)" "$T/pc"
PET_SHUTDOWN_TIMEOUT=4 TORCH_ELASTIC_SHUTDOWN_TIMEOUT=7 "$CRUN" --standalone --print-config /bin/true >"$T/pc"
expect_grep "PET_ wins" "^shutdown_timeout *= 4 .*PET_SHUTDOWN_TIMEOUT" "$T/pc"

# --- the tee prefix template -------------------------------------------------
TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='<${rank}|${role_name}|${local_rank}|$x> ' \
	"$CRUN" --standalone --nproc_per_node=2 --role=tr -t 3 --log_dir="$T/lp" "$FAKE_WORKER" eprint hi >"$T/pt.out" 2>&1 ||
	fail "prefix template run failed"
expect_grep "template of rank 0" '^<0|tr|0|$x> hi$' "$T/pt.out"
expect_grep "template of rank 1" '^<1|tr|1|$x> hi$' "$T/pt.out"
exit 0
