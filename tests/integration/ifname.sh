#!/bin/sh
# needs: torch
# Host names that point at loopback: two namespace hosts whose
# own names resolve to 127.0.1.1, as on a stock Debian or Ubuntu machine, and
# then not at all, as in many containers. Real gloo DDP across them fails
# (workers bind to loopback), and crun says beforehand which interface to use;
# with --rdzv_conf=set_socket_ifname=true it exports GLOO_SOCKET_IFNAME and
# the same job passes.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh
need_torch
export NETNS_OWN_NAME=loopback
netns_setup 2
export PYTHON
unset GLOO_SOCKET_IFNAME NCCL_SOCKET_IFNAME
IF1=ce$NETNS_IFID-1 IF2=ce$NETNS_IFID-2
PORT=29407

# job NAME CONF: a 1 + 1 gloo DDP job on h1 and h2; statuses in $T/NAME.{a,b}.rc
job() {
	mkdir -p "$T/$1"
	netns_spawn h1 "$T/$1.a.out" "$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint=h1:$PORT --rdzv_id="$1" --rdzv_conf=last_call_timeout=1,join_timeout=30$2 \
		tests/integration/py/ddp_gloo.py --out "$T/$1"
	pa=$NETNS_PID
	netns_spawn h2 "$T/$1.b.out" "$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint=h1:$PORT --rdzv_id="$1" --rdzv_conf=last_call_timeout=1,join_timeout=30$2 \
		tests/integration/py/ddp_gloo.py --out "$T/$1"
	pb=$NETNS_PID
	for p in $pa $pb; do
		wait_for 120 sh -c "! kill -0 $p 2>/dev/null" || fail "$1: agent $p still runs after 120 s"
	done
	wait $pa; echo $? >"$T/$1.a.rc"
	wait $pb; echo $? >"$T/$1.b.rc"
	PORT=$((PORT + 1))
}

# 1. Without the option: the warning, on both nodes, naming each one's
# interface; and gloo indeed fails.
job plain ""
expect_grep "h1 warned" "host name 'h1' resolves to loopback 127.0.1.1: gloo will bind there .* set GLOO_SOCKET_IFNAME=$IF1" "$T/plain.a.out"
expect_grep "h2 warned" "host name 'h2' resolves to loopback 127.0.1.1: .* GLOO_SOCKET_IFNAME=$IF2 (the interface of $NETNS_SUBNET.2" "$T/plain.b.out"
[ "$(cat "$T/plain.a.rc")" != 0 ] || [ "$(cat "$T/plain.b.rc")" != 0 ] ||
	fail "gloo worked with host names at loopback: the scenario did not reproduce the failure"

# 2. With set_socket_ifname=true: exported, said, and the job passes.
job fixed ",set_socket_ifname=true"
for n in a b; do
	[ "$(cat "$T/fixed.$n.rc")" = 0 ] || { tail -n 20 "$T/fixed.$n.out"; fail "set_socket_ifname: agent $n exited $(cat "$T/fixed.$n.rc")"; }
done
expect_grep "h2 says what it set" "host name 'h2' resolves to loopback 127.0.1.1: workers get GLOO_SOCKET_IFNAME=$IF2" "$T/fixed.b.out"
for r in 0 1; do
	expect_grep "rank $r trained" "^rank $r/2 attempt 0 sum 3 want 3 replicas_equal True" "$T/fixed/rank.$r"
done
exit 0
