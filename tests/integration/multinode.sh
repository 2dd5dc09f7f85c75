#!/bin/sh
# Multi-node on loopback: several agents on one machine meet at one c10d
# endpoint. Heterogeneous nodes, job-wide restarts, node loss and re-forming,
# loss of the store host, scale-up, join timeout, and mismatched jobs.
. tests/integration/lib.sh

FAST="--rdzv_conf=last_call_timeout=1,join_timeout=20"
lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }
v() { sed -n "s/^$1=//p" "$2"; }

# agent NAME NPROC NNODES [crun flags...] -- worker args: start in background.
agent() {
	name=$1 n=$2 nn=$3; shift 3
	"$CRUN" --nnodes="$nn" --nproc_per_node="$n" --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id="$JOB" "$@" >"$T/$name.out" 2>&1 &
	eval "pid_$name=\$!"
}
# expect_status NAME WANT [SECONDS]: agent NAME exits within SECONDS (default
# 30) with status WANT; one still running then is killed and the test fails.
expect_status() {
	eval "_p=\$pid_$1"
	wait_for "${3:-30}" exited "$_p" || { kill -KILL "$_p"; cat "$T/$1.out" >&2; fail "agent $1 still running after ${3:-30} s"; }
	wait "$_p"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$1.out" >&2; fail "agent $1 exited $_rc, want $2"; }
}

# 1. Three nodes with 4, 2 and 1 workers: ranks 0-6, world 7.
PORT=$(free_port) JOB=hetero
agent a 4 3 "$FAKE_WORKER" env "$T/h_a"
wait_for 10 listening $PORT || fail "agent a never served the store"
agent b 2 3 "$FAKE_WORKER" env "$T/h_b"
agent c 1 3 "$FAKE_WORKER" env "$T/h_c"
for x in a b c; do expect_status $x 0; done
expect_eq "every rank once" "$(cat "$T"/h_* | sed -n 's/^RANK=//p' | sort -n | tr '\n' ' ')" "0 1 2 3 4 5 6 "
expect_eq "world size" "$(cat "$T"/h_* | sed -n 's/^WORLD_SIZE=//p' | sort -u)" 7
expect_eq "group world size" "$(cat "$T"/h_* | sed -n 's/^GROUP_WORLD_SIZE=//p' | sort -u)" 3
expect_eq "role world size" "$(cat "$T"/h_* | sed -n 's/^ROLE_WORLD_SIZE=//p' | sort -u)" 7
for f in "$T"/h_*; do expect_eq "ROLE_RANK = RANK in $f" "$(v ROLE_RANK "$f")" "$(v RANK "$f")"; done
expect_eq "one store for all" "$(cat "$T"/h_* | sed -n 's/^MASTER_PORT=//p' | sort -u | wc -l)" 1
expect_eq "agent store" "$(cat "$T"/h_* | sed -n 's/^TORCHELASTIC_USE_AGENT_STORE=//p' | sort -u)" True
# The store host (a, started first) is group rank 0 with ranks 0-3.
expect_eq "host group rank" "$(v GROUP_RANK "$T/h_a.0")" 0
expect_eq "host ranks" "$(for r in 0 1 2 3; do v RANK "$T/h_a.$r"; done | tr '\n' ' ')" "0 1 2 3 "
for f in "$T"/h_b.* "$T"/h_c.*; do
	lws=$(v LOCAL_WORLD_SIZE "$f"); gr=$(v GROUP_RANK "$f"); rank=$(v RANK "$f")
	case "$(basename "$f" | cut -c1-3)" in h_b) expect_eq "b lws" "$lws" 2;; h_c) expect_eq "c lws" "$lws" 1;; esac
	# RANK = prefix sum of the local world sizes before this group rank.
	if [ "$lws" = 2 ]; then base=$(( gr == 1 ? 4 : 5 )); else base=$(( gr == 1 ? 4 : 6 )); fi
	expect_eq "rank of $f" "$rank" $(( base + $(v LOCAL_RANK "$f") ))
done

# 2. A worker failure on one node restarts every node, one generation.
PORT=$(free_port) JOB=restart
agent a 2 2 --max_restarts=1 --log_dir="$T/la" "$FAKE_WORKER" append "$T/runs" run fail-if 3 0 5 hang-if-attempt 0
agent b 2 2 --max_restarts=1 --log_dir="$T/lb" "$FAKE_WORKER" append "$T/runs" run fail-if 3 0 5 hang-if-attempt 0
expect_status a 0
expect_status b 0
expect_eq "every rank ran generation 1" "$(grep ' 1$' "$T/runs" | sort | tr '\n' ' ')" "run 0 1 run 1 1 run 2 1 run 3 1 "
cat "$T/a.out" "$T/b.out" >"$T/ab.out"
expect_grep "the other node heard of it" "a worker failed on another node" "$T/ab.out"
expect_grep "restart counted once, job-wide" "restart 1 of 1 after a worker failure" "$T/ab.out"
for d in la lb; do
	[ -d "$(echo "$T/$d"/restart_*)/attempt_0/0" ] && [ -d "$(echo "$T/$d"/restart_*)/attempt_1/1" ] ||
		fail "log directories of generations 0 and 1 missing in $d"
done

# 3. Restarts exhausted: every node exits with the failed worker's status.
PORT=$(free_port) JOB=exhaust
agent a 1 2 "$FAKE_WORKER" fail-if 1 0 9 hang
agent b 1 2 "$FAKE_WORKER" fail-if 1 0 9 hang
expect_status a 9
expect_status b 9
cat "$T/a.out" "$T/b.out" >"$T/ab.out"
expect_grep "root cause printed" "Root Cause (first observed failure):" "$T/ab.out"
expect_grep "job failure named" "job failed: rank 1" "$T/ab.out"

# 4. kill -9 of a non-host agent with MIN still met: the others re-form
# without it (no restart spent) and finish.
PORT=$(free_port) JOB=nodeloss
agent a 1 2:3 $FAST "$FAKE_WORKER" pid "$T/pids4" hang-if-attempt 0
wait_for 10 listening $PORT || fail "no store host"
agent b 1 2:3 $FAST "$FAKE_WORKER" pid "$T/pids4" hang-if-attempt 0
agent c 1 2:3 $FAST "$FAKE_WORKER" pid "$T/pids4" hang-if-attempt 0
wait_for 20 lines "$T/pids4" 3 || fail "round 0 never ran 3 workers"
kill -KILL $pid_c
wait_pid 5 $pid_c 2>/dev/null
expect_status a 0
expect_status b 0
cat "$T/a.out" "$T/b.out" >"$T/ab.out"
expect_grep "loss seen at once by the store host" "(group rank [0-9]) disconnected" "$T/ab.out"
expect_grep "re-formed without a restart" "no restart is spent" "$T/ab.out"

# 5. Losing the store host ends the job everywhere, with a clear error.
PORT=$(free_port) JOB=hostloss
agent a 1 2 "$FAKE_WORKER" pid "$T/pids5" hang
wait_for 10 listening $PORT || fail "no store host"
agent b 1 2 "$FAKE_WORKER" pid "$T/pids5" hang
wait_for 20 lines "$T/pids5" 2 || fail "round 0 never ran"
kill -KILL $pid_a
# docs/rendezvous.md: a killed store host is noticed by every node at once.
ms=$(ms_until 1000 grep -q "lost the rendezvous store" "$T/b.out") ||
	{ cat "$T/b.out" >&2; fail "took $ms ms to notice the host died, want <= 1000 ms"; }
expect_status b 1

# 6. A late node is admitted (up to MAX) without spending a restart.
PORT=$(free_port) JOB=scaleup
agent a 1 2:3 $FAST "$FAKE_WORKER" env "$T/s_a" pid "$T/pids6" hang-if-attempt 0
wait_for 10 listening $PORT || fail "no store host"
agent b 1 2:3 $FAST "$FAKE_WORKER" env "$T/s_b" pid "$T/pids6" hang-if-attempt 0
wait_for 20 lines "$T/pids6" 2 || fail "round 0 never ran"
agent c 2 2:3 $FAST "$FAKE_WORKER" env "$T/s_c" hang-if-attempt 0
for x in a b c; do expect_status $x 0; done
expect_eq "world grew to 4" "$(cat "$T"/s_c.* | sed -n 's/^WORLD_SIZE=//p' | sort -u)" 4
expect_eq "ranks of the grown world" "$(cat "$T"/s_* | sed -n 's/^RANK=//p' | sort -n | tr '\n' ' ')" "0 1 2 3 "
expect_grep "admitted" "asking it to re-form to admit" "$T/c.out"

# 7. A join timeout names who joined and how many are missing.
PORT=$(free_port) JOB=lonely
agent a 4 2 --rdzv_conf=join_timeout=1 "$FAKE_WORKER" exit 0
expect_status a 1
expect_grep "timeout message" "timed out after 1 s with 1 of at least 2 nodes: joined .* (4 workers); still missing 1" "$T/a.out"

# 8. Two jobs on one endpoint are refused, never mixed.
PORT=$(free_port) JOB=first
agent a 1 2 --rdzv_conf=join_timeout=10 "$FAKE_WORKER" exit 0
wait_for 10 listening $PORT || fail "no store host"
JOB=second
agent b 1 2 "$FAKE_WORKER" exit 0
expect_status b 1
expect_grep "other job named" "serves job 'first', not 'second'" "$T/b.out"
JOB=first
agent c 1 3 "$FAKE_WORKER" exit 0
expect_status c 1
expect_grep "nnodes mismatch" "already runs with \"nnodes=2:2 backend=c10d proto=3\"" "$T/c.out"
kill $pid_a; wait_pid 10 $pid_a 2>/dev/null

# 9. Static backend: node ranks given, heterogeneous nodes.
PORT=$(free_port)
"$CRUN" --nnodes=2 --node_rank=1 --nproc_per_node=1 --master_addr=127.0.0.1 --master_port=$PORT \
	"$FAKE_WORKER" env "$T/st_1" >"$T/st1.out" 2>&1 &
p1=$!
"$CRUN" --nnodes=2 --node_rank=0 --nproc_per_node=3 --master_addr=127.0.0.1 --master_port=$PORT \
	"$FAKE_WORKER" env "$T/st_0" >"$T/st0.out" 2>&1 || fail "static node 0: $(cat "$T/st0.out")"
wait_pid 30 $p1 || fail "static node 1: $(cat "$T/st1.out")"
expect_eq "static node 1 group rank" "$(v GROUP_RANK "$T/st_1.0")" 1
expect_eq "static node 1 rank" "$(v RANK "$T/st_1.0")" 3
expect_eq "static world" "$(v WORLD_SIZE "$T/st_1.0")" 4

# 10. One node finishing early never fails the others: not when the store
# host finishes first, not when another node does.
PORT=$(free_port) JOB=early1
agent a 1 2 "$FAKE_WORKER" exit 0
wait_for 10 listening $PORT || fail "no store host"
agent b 1 2 "$FAKE_WORKER" sleep 3000
expect_status b 0
expect_status a 0
PORT=$(free_port) JOB=early2
agent a 1 2 "$FAKE_WORKER" sleep 3000
wait_for 10 listening $PORT || fail "no store host"
agent b 1 2 "$FAKE_WORKER" exit 0
expect_status b 0
expect_status a 0
expect_nogrep "no false death" "stopped answering\|disconnected" "$T/a.out"

# 10b. A warning to the store host once its workers are done (under SLURM
# every process of the step hears --signal=USR1@T, a worker possibly before
# its crun) does not take the store from the others: it serves until they
# have left, so b's worker still gets its own USR1, and both exit 128+USR1.
# (USR1 handled as under SLURM; a SIGTERM ends that wait at once: nodeloss.sh.)
USR1=--signals_to_handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1
PORT=$(free_port) JOB=hostsig
agent a 1 2 $USR1 "$FAKE_WORKER" exit 0
wait_for 10 listening $PORT || fail "no store host"
agent b 1 2 $USR1 "$FAKE_WORKER" trap "$T/hostsig.b" pid "$T/hostsig.pid" hang
a_done() { grep -q "1 worker of .* succeeded" "$T/a.out"; }
wait_for 20 a_done || { cat "$T/a.out" "$T/b.out" >&2; fail "hostsig: a's worker never finished"; }
kill -USR1 $pid_a
a_heard() { grep -q "received SIGUSR1" "$T/a.out"; }
wait_for 10 a_heard || { cat "$T/a.out" >&2; fail "hostsig: a did not take SIGUSR1"; }
"$CRUN" status --rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=$JOB >"$T/hostsig.st" 2>&1 ||
	{ cat "$T/a.out" "$T/b.out" "$T/hostsig.st" >&2; fail "hostsig: the store went with a's signal while b still ran"; }
wait_for 10 lines "$T/hostsig.pid" 1 || { cat "$T/b.out" >&2; fail "hostsig: b's worker never set its trap"; }
kill -USR1 $pid_b
expect_status b 138
expect_status a 138
expect_eq "hostsig: b's worker got its own signal" "$(cat "$T/hostsig.b")" "SIGUSR1 1"
expect_grep "hostsig: a says it serves on" "received SIGUSR1 while the other nodes finish: serving the store until they have left" "$T/a.out"
# A store host stopped by Ctrl-C waits for the others to leave (b's worker
# ignores the SIGINT passed on); a second Ctrl-C ends that wait at once.
PORT=$(free_port) JOB=hostsig2
agent a 1 2 "$FAKE_WORKER" trap "$T/hostsig2.a" pid "$T/hostsig2.pid" hang
wait_for 10 listening $PORT || fail "no store host"
agent b 1 2 --shutdown_timeout=5 "$FAKE_WORKER" ignore INT pid "$T/hostsig2.pid" hang
wait_for 20 lines "$T/hostsig2.pid" 2 || { cat "$T/a.out" "$T/b.out" >&2; fail "hostsig2: the workers never started"; }
kill -INT $pid_a
b_told() { grep -q "round 0 ended" "$T/b.out"; }
wait_for 10 b_told || { cat "$T/a.out" "$T/b.out" >&2; fail "hostsig2: b never heard of a's stop"; }
kill -INT $pid_a
expect_status a 130 10
expect_grep "hostsig2: a second Ctrl-C exits" "received SIGINT while waiting for the other nodes to leave: exiting" "$T/a.out"
# b passed the host's SIGINT on; its worker ignored it and was killed after
# --shutdown_timeout: the job stopped with the host's signal.
expect_status b 130
expect_grep "hostsig2: b stops with the host's signal" "job stopped: the store host .* was stopped (SIGINT)" "$T/b.out"

# 11. The endpoint port held by something that is not a crun store: a clear
# error naming the port (and the holder when it listens), within seconds.
PORT=$(free_port)
"$PYTHON" -c "
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $PORT)); s.listen()
while True:
    c, _ = s.accept(); c.recv(64); c.close()
" &
squatter=$!
at_exit "kill $squatter"
wait_for 10 listening $PORT || fail "the squatter never listened"
JOB=squat
agent a 1 2 "$FAKE_WORKER" exit 0
expect_status a 1
expect_grep "names port and holder" "port $PORT of 127.0.0.1 is in use by another program, pid $squatter (python3) that is not a crun store" "$T/a.out"
kill $squatter; wait_pid 5 $squatter 2>/dev/null
# A lone node of an elastic range waits last_call_timeout for a second one,
# as torchrun's c10d does, and says so (it waited 30 s without a word), then
# runs and exits at once after its worker.
PORT=$(free_port) JOB=lone
agent a 1 1:2 --rdzv_conf=last_call_timeout=2,close_timeout=20 "$FAKE_WORKER" exit 0
expect_status a 0 15
expect_grep "lone node's last call" "round 0: 1 of 1-2 nodes have joined: waiting up to 2 s for more (last_call_timeout)" "$T/a.out"
exit 0
