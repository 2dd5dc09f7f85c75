#!/bin/sh
# Hosts whose names resolve nowhere (containers, Kubernetes pods, cloud VMs
# without DNS): three network-namespace hosts h1..h3 whose /etc/hosts holds
# only localhost (NETNS_OWN_NAME=nowhere), the endpoint given as h1's address.
# The workers' store must admit the round's nodes by the addresses they
# announce, and MASTER_ADDR must be something the other hosts can reach.
#   1. real PyTorch gloo DDP on 3 hosts, 2+1+1 workers, with
#      --rdzv_conf=set_socket_ifname=true (gloo needs the interface when the
#      host name does not resolve)
#   2. the same 3 hosts without set_socket_ifname: each worker's TCPStore
#      client on its own host sets and reads a key in the workers' store
. tests/integration/lib.sh
. tests/integration/lib_netns.sh

need_torch
export NETNS_OWN_NAME=nowhere
netns_setup 3
export PYTHON

H1=$(netns_addr h1)
FAST="--rdzv_conf=last_call_timeout=1,join_timeout=20"

# agent NAME HOST NPROC [crun flags and worker...]: crun on HOST in the
# background (log $T/NAME.out, pid in $pid_NAME), endpoint h1's address.
agent() {
	_name=$1 _h=$2 _np=$3; shift 3
	netns_spawn "$_h" "$T/$_name.out" "$CRUN" --nnodes=3 --nproc_per_node="$_np" \
		--rdzv_backend=c10d --rdzv_endpoint="$H1:$PORT" --rdzv_id="$JOB" "$@"
	eval "pid_$_name=\$NETNS_PID"
}
# expect_ok NAME: the agent exits 0 within 90 s, else its log is shown.
expect_ok() {
	eval "wait_pid 90 \$pid_$1 \"$T/$1.out\""; _rc=$?
	[ "$_rc" = 0 ] || { cat "$T/$1.out" >&2; fail "agent $1 exited $_rc, want 0"; }
	! grep -q "not a node of this round\|cannot resolve" "$T/$1.out" ||
		{ cat "$T/$1.out" >&2; fail "agent $1 refused or could not resolve a node"; }
}

netns_exec h2 getent hosts h1 >/dev/null && fail "h1 resolves on h2: the hosts are not nameless"
netns_exec h1 getent hosts h1 >/dev/null && fail "h1 resolves on h1: the hosts are not nameless"

# ---------------------------------------------------------------------------
note "1. gloo DDP on 3 nameless hosts, set_socket_ifname=true"
PORT=29431 JOB=ddp
mkdir "$T/ddp"
agent a h1 2 $FAST --rdzv_conf=set_socket_ifname=true tests/integration/py/ddp_gloo.py --out "$T/ddp"
agent b h2 1 $FAST --rdzv_conf=set_socket_ifname=true tests/integration/py/ddp_gloo.py --out "$T/ddp"
agent c h3 1 $FAST --rdzv_conf=set_socket_ifname=true tests/integration/py/ddp_gloo.py --out "$T/ddp"
for x in a b c; do expect_ok $x; done
for r in 0 1 2 3; do
	expect_grep "rank $r result" "^rank $r/4 attempt 0 sum 10 want 10 replicas_equal True store True" "$T/ddp/rank.$r"
done

# ---------------------------------------------------------------------------
note "2. TCPStore clients on 3 nameless hosts, no set_socket_ifname"
cat >"$T/storeprobe.py" <<'EOF'
import datetime, os, sys
import torch.distributed as dist
s = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]),
                  is_master=False, timeout=datetime.timedelta(seconds=20))
me = os.environ["RANK"]
s.set("probe/" + me, os.environ["MASTER_ADDR"])
s.wait(["probe/%d" % r for r in range(int(os.environ["WORLD_SIZE"]))])
with open(os.path.join(sys.argv[1], "probe." + me), "w") as f:
    f.write("master %s read %s\n" % (os.environ["MASTER_ADDR"], s.get("probe/0").decode()))
EOF
PORT=29432 JOB=probe
mkdir "$T/probe"
agent a h1 1 $FAST "$T/storeprobe.py" "$T/probe"
agent b h2 1 $FAST "$T/storeprobe.py" "$T/probe"
agent c h3 1 $FAST "$T/storeprobe.py" "$T/probe"
for x in a b c; do expect_ok $x; done
for r in 0 1 2; do
	expect_grep "rank $r probe" "^master $H1 read $H1\$" "$T/probe/probe.$r"
done
exit 0
