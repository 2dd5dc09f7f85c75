#!/bin/sh
# needs: torch
# The per-node store relay (--rdzv_conf=store_relay=true) with real PyTorch
# gloo workers on network-namespace hosts (lib_netns.sh), run once per torch
# (1.13 and 2.x):
#   1. 3 hosts x 2 workers: init_process_group and all_reduce through the
#      relays; the workers' MASTER_ADDR is their own node's relay
#      (127.0.0.1, not the store host) and the workers' store on h1 holds
#      one connection per node (3, from its metrics), not one or two per rank;
#      then a barrier and another all_reduce through the same store.
#   2. DDP (ddp_gloo.py) on 2 hosts with a worker failure on attempt 0: the
#      restart forms a fresh process group through fresh relays.
#   3. a node loss (--nnodes=2:3, kill -9 of h3 while its workers run): the
#      other two re-form and their workers init again through new relays.
#   4. a relay that loses the workers' store (its one connection killed with
#      ss -K): its node ends the round as a lost store and exits 1, its
#      workers are not left waiting, and the other two re-form without it.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh
need_torch

netns_setup 3
export PYTHON

FAST="--rdzv_conf=last_call_timeout=1,join_timeout=30,store_relay=true"
count() { ls "$1" 2>/dev/null | grep -c "^$2\." ; }
have() { [ "$(count "$1" "$2")" -ge "$3" ]; }
agent() {
	_name=$1 _h=$2 _np=$3 _nn=$4; shift 4
	netns_spawn "$_h" "$T/$_name.out" "$CRUN" --nnodes="$_nn" --nproc_per_node="$_np" \
		--rdzv_backend=c10d --rdzv_endpoint="h1:$PORT" --rdzv_id="$JOB" "$@"
	eval "pid_$_name=\$NETNS_PID"
	at_exit "kill -KILL \$pid_$_name 2>/dev/null"
}
agent_exited() { eval "exited \$pid_$1"; }
expect_status() {
	wait_for "${3:-60}" agent_exited "$1" || { tail -n 30 "$T/$1.out" >&2; fail "agent $1 still running after ${3:-60} s"; }
	eval "wait \$pid_$1"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$1.out" >&2; fail "agent $1 exited $_rc, want $2"; }
}
# metric HOST URL NAME: the value of one sample, scraped inside HOST.
metric() {
	netns_exec "$1" "$PYTHON" -c 'import sys, urllib.request
for l in urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=5).read().decode().splitlines():
    if l.startswith(sys.argv[2] + " "):
        print(l.split()[1])' "$2" "$3" 2>/dev/null
}

# 1. 3 hosts x 2 ranks; the store sees 3 connections.
PORT=29501 JOB=relay1
D="$T/r1"; mkdir "$D"
agent a h1 2 3 $FAST --metrics_port=29511 --metrics_addr=0.0.0.0 tests/integration/py/relay_hold.py --dir "$D"
agent b h2 2 3 $FAST tests/integration/py/relay_hold.py --dir "$D"
agent c h3 2 3 $FAST tests/integration/py/relay_hold.py --dir "$D"
wait_for 90 have "$D" ready 6 || { cat "$T"/[abc].out >&2; fail "1. the 6 ranks never got through init_process_group"; }
for r in 0 1 2 3 4 5; do
	expect_grep "1. rank $r's MASTER_ADDR is its relay" "^attempt 0 world 6 addr 127.0.0.1 port [0-9]" "$D/ready.$r"
done
URL="http://$(netns_addr h1):29511"
n=$(metric h1 "$URL" 'crun_store_connections{store="workers"}')
expect_eq "1. the workers' store holds one connection per node" "$n" 3
touch "$D/go"
expect_status a 0
expect_status b 0
expect_status c 0
for r in 0 1 2 3 4 5; do
	expect_grep "1. rank $r after the barrier" "^rank $r/6 attempt 0 sum 21 want 21 count 6$" "$D/done.$r"
done
expect_grep "1. h2 ran the round" "round 0: group rank" "$T/b.out"
note "1. 3 hosts x 2 ranks through relays; the workers' store held $n connections"

# 2. DDP and a restart after a worker failure.
PORT=29502 JOB=relay2
D="$T/r2"; mkdir "$D"
agent a h1 2 2 $FAST --max_restarts=1 tests/integration/py/ddp_gloo.py --out "$D" --fail-on-attempt 0
agent b h2 1 2 $FAST --max_restarts=1 tests/integration/py/ddp_gloo.py --out "$D" --fail-on-attempt 0
expect_status a 0 90
expect_status b 0 90
expect_grep "2. restarted once" "restart 1 of 1 after a worker failure" "$T/a.out"
for r in 0 1 2; do
	expect_grep "2. rank $r after the restart" "^rank $r/3 attempt 1 sum 6 want 6 replicas_equal True store True new_group ok objects ok store_server none$" "$D/rank.$r"
done
note "2. DDP restarted through fresh relays"

# 3. A node loss: kill -9 of h3 while every worker waits after init; h1 and
# h2 re-form (no restart spent) and their workers init again.
PORT=29503 JOB=relay3
D="$T/r3"; mkdir "$D"
agent a h1 1 2:3 $FAST tests/integration/py/relay_hold.py --dir "$D" --hang-on-attempt 0
agent b h2 1 2:3 $FAST tests/integration/py/relay_hold.py --dir "$D" --hang-on-attempt 0
agent c h3 1 2:3 $FAST tests/integration/py/relay_hold.py --dir "$D" --hang-on-attempt 0
wait_for 90 have "$D" ready 3 || { cat "$T"/[abc].out >&2; fail "3. round 0 never got through init_process_group"; }
rm -f "$D"/ready.*
netns_kill h3 KILL
wait_for 90 have "$D" ready 2 || { cat "$T"/[ab].out >&2; fail "3. the re-formed round never got through init_process_group"; }
for r in 0 1; do
	expect_grep "3. rank $r in the re-formed round" "^attempt 1 world 2 addr 127.0.0.1 " "$D/ready.$r"
done
touch "$D/go"
expect_status a 0 60
expect_status b 0 60
for r in 0 1; do
	expect_grep "3. rank $r finished" "^rank $r/2 attempt 1 sum 3 want 3 count 2$" "$D/done.$r"
done
expect_grep "3. no restart spent" "no restart is spent" "$T/a.out"
note "3. a killed node: the others re-formed through new relays"

# 4. Cut h2's relay off the workers' store: kill its one connection there.
PORT=29504 JOB=relay4
D="$T/r4"; mkdir "$D"
agent a h1 1 2:3 $FAST tests/integration/py/relay_hold.py --dir "$D" --hang-on-attempt 0
agent b h2 1 2:3 $FAST tests/integration/py/relay_hold.py --dir "$D" --hang-on-attempt 0
agent c h3 1 2:3 $FAST tests/integration/py/relay_hold.py --dir "$D" --hang-on-attempt 0
wait_for 90 have "$D" ready 3 || { cat "$T"/[abc].out >&2; fail "4. round 0 never got through init_process_group"; }
H1=$(netns_addr h1)
WPORT=$(sed -n "s/^crun: round 0: .*, store [^ ]*:\([0-9]*\)$/\1/p" "$T/b.out" | head -n 1)
[ -n "$WPORT" ] || { cat "$T/b.out" >&2; fail "4. no workers' store port in h2's log"; }
rm -f "$D"/ready.*
netns_exec h2 ss -K dst "$H1" dport = ":$WPORT" >/dev/null 2>&1
wait_for 20 agent_exited b || { cat "$T/b.out" >&2; fail "4. h2 kept running after its relay lost the store"; }
expect_status b 1 5
expect_grep "4. h2 names its relay's loss" "lost the workers' store (its relay" "$T/b.out"
wait_for 90 have "$D" ready 2 || { cat "$T"/[ac].out >&2; fail "4. h1 and h3 never re-formed"; }
touch "$D/go"
expect_status a 0 60
expect_status c 0 60
for r in 0 1; do
	expect_grep "4. rank $r finished" "^rank $r/2 attempt 1 sum 3 want 3 count 2$" "$D/done.$r"
done
note "4. a relay cut off the store: its node left, the others re-formed"
exit 0
