#!/bin/sh
# needs: torch
# Which port the workers' store listens on, for clusters whose firewall
# opens only the ports it is told: on several static nodes the workers use
# --master_port itself, as with torchrun (real gloo workers across two agents
# prove PyTorch's clients use it, through a restart); a rendezvous secret
# keeps PyTorch away from the rendezvous store (it gets a port of its own,
# said once); a multi-node c10d job pins it with --rdzv_conf=store_port=P.
. tests/integration/lib.sh
need_torch
GLOO=$TOP/tests/integration/py/gloo_allreduce.py

# static N MASTER_PORT EXTRA...: two static agents (3 + 1 workers); waits.
static2() {
	mp=$1; shift
	"$CRUN" --nnodes=2 --node_rank=0 --nproc_per_node=3 --master_addr=127.0.0.1 \
		--master_port=$mp "$@" >"$T/s0.out" 2>&1 &
	p0=$!
	wait_for 10 listening "$mp" || fail "node 0 never listened on --master_port $mp"
	timeout 120 "$CRUN" --nnodes=2 --node_rank=1 --nproc_per_node=1 --master_addr=127.0.0.1 \
		--master_port=$mp "$@" >"$T/s1.out" 2>&1
	r1=$?
	wait $p0; r0=$?
}

# 1. Static: MASTER_PORT is --master_port on both nodes, and gloo works on it
# in two generations (a failure restarts the job once).
cat >"$T/gloo_fail_once.py" <<EOF2
import os, runpy, sys
if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["RANK"] == "3":
    sys.exit(5)
with open("$T/mp." + os.environ["RANK"] + "." + os.environ["TORCHELASTIC_RESTART_COUNT"], "w") as f:
    f.write(os.environ["MASTER_PORT"] + "\n")
runpy.run_path("$GLOO", run_name="__main__")
EOF2
MP=$(free_port)
static2 $MP --max_restarts=1 "$T/gloo_fail_once.py"
[ $r0 -eq 0 ] && [ $r1 -eq 0 ] || { tail -n 20 "$T/s0.out" "$T/s1.out"; fail "static 3+1 with a restart: exit $r0/$r1"; }
for r in 0 1 2 3; do
	expect_eq "rank $r's MASTER_PORT" "$(cat "$T/mp.$r.1")" "$MP"
done
expect_eq "all_reduce on --master_port" "$(grep -c 'all_reduce -> \[10.0, 10.0, 10.0, 10.0\]' "$T/s0.out" "$T/s1.out" | awk -F: '{s+=$2} END {print s}')" 4
expect_grep "the restart happened" "restart 1 of 1" "$T/s0.out"

# 2. Static with a secret: the workers get a store of their own, said once.
umask 077
head -c 32 /dev/urandom >"$T/secret"
MP=$(free_port)
static2 $MP --rdzv_conf=secret_file=$T/secret "$FAKE_WORKER" env "$T/sec"
[ $r0 -eq 0 ] && [ $r1 -eq 0 ] || { tail -n 20 "$T/s0.out" "$T/s1.out"; fail "static with a secret: exit $r0/$r1"; }
port=$(sed -n 's/^MASTER_PORT=//p' "$T/sec.0")
[ -n "$port" ] && [ "$port" != "$MP" ] || fail "with a secret the workers' store must not be --master_port ($port)"
expect_eq "said once" "$(grep -c "cannot share --master_port with a rendezvous secret" "$T/s0.out")" 1

# 3. c10d on two nodes: rdzv_conf store_port pins the workers' store.
PORT=$(free_port)
SP=$(free_port)
"$CRUN" --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_id=sp$$ --rdzv_conf=store_port=$SP "$GLOO" >"$T/c0.out" 2>&1 &
c0=$!
wait_for 10 listening "$PORT" || fail "no store host"
timeout 120 "$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_id=sp$$ --rdzv_conf=store_port=$SP "$GLOO" >"$T/c1.out" 2>&1
rc1=$?
wait $c0; rc0=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || { tail -n 20 "$T/c0.out" "$T/c1.out"; fail "c10d with store_port: exit $rc0/$rc1"; }
expect_grep "the round names the pinned store" "store 127.0.0.1:$SP" "$T/c0.out"
expect_grep "gloo over it" "all_reduce -> \[6.0, 6.0, 6.0, 6.0\]" "$T/c1.out"
"$CRUN" --rdzv_conf=store_port=70000 "$FAKE_WORKER" exit 0 >"$T/bad" 2>&1
expect_eq "store_port out of range" "$?" 2
exit 0
