#!/bin/sh
# needs: torch
# The etcd backend across network-namespace hosts: a 3-member cluster with
# one member per host (h1 h2 h3), real PyTorch gloo DDP over it, and the
# loss of group rank 0's agent together with the etcd leader mid-run, with
# the store relay off and on.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh
. tests/integration/lib_etcd.sh
need_etcd
netns_setup 3
export PYTHON

FAST="last_call_timeout=1,join_timeout=30,lease_ttl=2,read_timeout=10"
EPS="h1:2379,h2:2379,h3:2379"
now_ms() { date +%s%3N; }
agent_exited() { eval "exited \$pid_$1"; }
# agent NAME HOST NPROC NNODES [crun flags and worker...]
agent() {
	_name=$1 _h=$2 _np=$3 _nn=$4; shift 4
	netns_spawn "$_h" "$T/$_name.out" "$CRUN" --nnodes="$_nn" --nproc_per_node="$_np" \
		--rdzv_backend=etcd --rdzv_endpoint="$EP" --rdzv_id="$JOB" "$@"
	eval "pid_$_name=\$NETNS_PID"
}
expect_status() {
	wait_for "${3:-40}" agent_exited "$1" || { tail -n 20 "$T/$1.out" >&2; fail "agent $1 still running after ${3:-40} s"; }
	eval "wait \$pid_$1"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$1.out" >&2; fail "agent $1 exited $_rc, want $2"; }
}

ETCD_HOSTS="h1 h2 h3"
etcd_cluster 3
note "3 etcd members on h1 h2 h3 ($ETCD_EP)"

# 1. Real PyTorch: gloo DDP on h1 (2 workers), h2 (1) and h3 (1).
if "$PYTHON" -c 'import torch.distributed' 2>/dev/null; then
	note "1. PyTorch gloo DDP over etcd, h1 x2 + h2 x1 + h3 x1"
	EP=$EPS JOB=ddp
	mkdir "$T/ddp"
	t0=$(now_ms)
	agent a h1 2 3 --rdzv_conf=$FAST tests/integration/py/ddp_gloo.py --out "$T/ddp"
	agent b h2 1 3 --rdzv_conf=$FAST tests/integration/py/ddp_gloo.py --out "$T/ddp"
	agent c h3 1 3 --rdzv_conf=$FAST tests/integration/py/ddp_gloo.py --out "$T/ddp"
	for x in a b c; do expect_status $x 0 90; done
	for r in 0 1 2 3; do
		expect_grep "rank $r result" "^rank $r/4 attempt 0 sum 10 want 10 replicas_equal True" "$T/ddp/rank.$r"
	done
	note "   DDP over 3 hosts took $(( $(now_ms) - t0 )) ms"
else
	note "1. skipped: no PyTorch in $PYTHON"
fi

# 2. Mid-run, kill -9 the agent of group rank 0 and the etcd leader: the
#    other two re-form (MIN 2) through the surviving members and finish;
#    the same with the store relay forced on (the survivors' relays lose the
#    workers' store group rank 0 served: the same re-forming round).
for relay in false true; do
	L=$(etcd_leader) || fail "no etcd leader"
	EP="$(etcd_addr $L)"; for m in $ETCD_NAMES; do [ $m = $L ] || EP="$EP,$(etcd_addr $m)"; done
	JOB=kill$relay
	note "2. kill -9 group rank 0's agent and the etcd leader ($L) mid-run, store_relay=$relay"
	W="$FAKE_WORKER append $T/runs2$relay run hang-if-attempt 0"
	for x in a b c; do rm -f "$T/$x.out"; done
	agent a h1 1 2:3 --rdzv_conf=$FAST,store_relay=$relay $W
	agent b h2 1 2:3 --rdzv_conf=$FAST,store_relay=$relay $W
	agent c h3 1 2:3 --rdzv_conf=$FAST,store_relay=$relay $W
	wait_for 30 sh -c "grep -ls 'group rank 0 of 3' '$T/a.out' '$T/b.out' '$T/c.out' >/dev/null" || { cat "$T"/[abc].out >&2; fail "round 0 never formed"; }
	sleep 0.5
	g0=""; for x in a b c; do grep -q "group rank 0 of 3" "$T/$x.out" && g0=$x; done
	eval "kill -9 \$pid_$g0"
	etcd_kill $L
	t0=$(now_ms)
	for x in a b c; do [ $x = $g0 ] || expect_status $x 0 40; done
	cat "$T/a.out" "$T/b.out" "$T/c.out" >"$T/k.out"
	expect_grep "re-formed with 2" "round 1: group rank . of 2" "$T/k.out"
	expect_grep "no restart spent" "no restart is spent" "$T/k.out"
	expect_eq "the two survivors ran generation 1" "$(grep -c ' 1$' "$T/runs2$relay")" 2
	note "   survivors finished $(( $(now_ms) - t0 )) ms after the kills"
	grep -h "re-forming" "$T/k.out" | head -1 | sed 's/^/      /'
	etcd_start $L
	wait_for 20 etcd_healthy $L || fail "etcd member $L did not come back"
done
exit 0
