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
#      ss -K): the round ends as the loss of group rank 0 (it has not
#      finished), as a missed heartbeat would end it; all three re-form (h1
#      too, which is alive) and finish.
# With the rendezvous on a `crun store` of its own (no agent hosts it), with
# the relay on and off, which must end the same:
#   5. group rank 0's workers finish 3 s before the other node's, which then
#      use the workers' store: group rank 0 serves it until every node left.
#   6. kill -9 of group rank 0's agent (--nnodes=2:3): the others re-form
#      with a new store host (no restart spent) and finish.
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
# As when h1 stops answering its heartbeat, the round ends as the loss of
# group rank 0 (which has not finished): all three re-form, h1 with them as
# it is alive, and finish.
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
world3() { [ "$(cat "$D"/ready.* 2>/dev/null | grep -c '^attempt [1-9][0-9]* world 3 ')" = 3 ]; }
wait_for 90 world3 || { cat "$T"/[abc].out >&2; fail "4. the three nodes never re-formed"; }
touch "$D/go"
expect_status a 0 60
expect_status b 0 60
expect_status c 0 60
expect_grep "4. h2 names its relay's loss" "store relay lost the workers' store at h1:$WPORT" "$T/b.out"
cat "$T"/[abc].out >"$T/abc4.out"
expect_grep "4. the round ended as group rank 0's loss" "h1 (group rank 0) lost: a node's store relay lost its workers' store" "$T/abc4.out"
expect_grep "4. no restart spent" "no restart is spent" "$T/abc4.out"
note "4. a relay cut off the store: the round ended as h1's loss, all three re-formed"

# The rendezvous on a `crun store` of its own (h3), so that no agent hosts it:
# group rank 0 hosts only the workers' store. Each case runs with the relay
# forced on and off and must end the same way.
# store_on_h3 PORT: a `crun store` on h3 (one job per store).
store_on_h3() {
	SPORT=$1
	netns_spawn h3 "$T/store$SPORT.out" "$CRUN" store --port "$SPORT"
	at_exit "kill -KILL $NETNS_PID 2>/dev/null"
	wait_for 20 store_up || { cat "$T/store$SPORT.out" >&2; fail "no crun store on h3:$SPORT"; }
}
store_up() { netns_exec h3 ss -Hltn "sport = :$SPORT" | grep -q .; }
sagent() {
	_name=$1 _h=$2 _nn=$3 _relay=$4; shift 4
	netns_spawn "$_h" "$T/$_name.out" "$CRUN" --nnodes="$_nn" --nproc_per_node=1 \
		--rdzv_backend=c10d --rdzv_endpoint="h3:$SPORT" --rdzv_id="$JOB" \
		"--rdzv_conf=last_call_timeout=1,join_timeout=30,store_relay=$_relay" "$@"
	eval "pid_$_name=\$NETNS_PID"
	at_exit "kill -KILL \$pid_$_name 2>/dev/null"
}
# grank0 A B...: the name of the agent that was group rank 0 in round 0.
grank0() { for _x; do grep -q "round 0: group rank 0 of" "$T/$_x.out" && echo "$_x" && return 0; done; return 1; }

# 5. Group rank 0's workers finish 3 s before the other node's, which then
# use the workers' store: it keeps serving until every node has left.
for relay in true false; do
	JOB=relay5$relay D="$T/r5$relay"; mkdir "$D"
	store_on_h3 $([ $relay = true ] && echo 29505 || echo 29506)
	sagent a h1 2 $relay tests/integration/py/relay_late.py --dir "$D"
	sagent b h2 2 $relay tests/integration/py/relay_late.py --dir "$D"
	expect_status a 0 60
	expect_status b 0 60
	expect_eq "5. (relay $relay) the late rank used the store" "$(cat "$D"/late.*)" "ok"
done
note "5. group rank 0 finished first: it served the workers' store until the end (relay on and off)"

# 6. kill -9 of group rank 0's agent (--nnodes=2:3): the others re-form
# with a new store host, no restart spent, and finish.
for relay in true false; do
	JOB=relay6$relay D="$T/r6$relay"; mkdir "$D"
	store_on_h3 $([ $relay = true ] && echo 29507 || echo 29508)
	sagent a h1 2:3 $relay tests/integration/py/relay_hold.py --dir "$D" --hang-on-attempt 0
	sagent b h2 2:3 $relay tests/integration/py/relay_hold.py --dir "$D" --hang-on-attempt 0
	sagent c h3 2:3 $relay tests/integration/py/relay_hold.py --dir "$D" --hang-on-attempt 0
	wait_for 90 have "$D" ready 3 || { cat "$T"/[abc].out >&2; fail "6. (relay $relay) round 0 never got through init_process_group"; }
	g0=$(grank0 a b c) || { cat "$T"/[abc].out >&2; fail "6. no group rank 0"; }
	rm -f "$D"/ready.*
	eval "kill -KILL \$pid_$g0"
	wait_for 90 have "$D" ready 2 || { cat "$T"/[abc].out >&2; fail "6. (relay $relay) the survivors never re-formed"; }
	touch "$D/go"
	for x in a b c; do
		[ "$x" = "$g0" ] && continue
		expect_status $x 0 60
		expect_grep "6. (relay $relay) $x: no restart spent" "no restart is spent" "$T/$x.out"
	done
	for r in 0 1; do
		expect_grep "6. (relay $relay) rank $r finished" "^rank $r/2 attempt 1 sum 3 want 3 count 2$" "$D/done.$r"
	done
done
note "6. kill -9 of group rank 0 (rendezvous elsewhere): the others re-formed (relay on and off)"
exit 0
