#!/bin/sh
# Spares: three agents for --nnodes=2, one worker each, on loopback; the
# third to come finds round 0 full and waits as a spare. When the job
# succeeds, the spare ends with it: exit 0 and one line saying it was not
# needed (a spare that exited 1 would fail a SLURM job that succeeded).
# While it waits, `crun status` lists it as a spare.
#   1. c10d: a hosts the store, b and the spare c reach it.
#   2. etcd: the same three agents on one real etcd member.
# When an active node is lost (kill -9 of its agent), the spare takes its
# place: the job re-forms with 2 nodes, no restart spent, and finishes.
# When the job fails for good, the spare exits with the job's status.
#   3, 4. c10d: the lost node; the failed job (the store host leaves).
#   5, 6. etcd: the same.
# When the node whose failures keep ending rounds is left out
# (exclude_after=2), the spare takes its place too.
#   7. c10d: b's worker always fails; after two rounds b is left out, a and
#      the spare c finish the job; all three exit 0.
. tests/integration/lib.sh
. tests/integration/lib_etcd.sh

CONF="last_call_timeout=1,join_timeout=30,keep_alive_interval=0.2"
WORKER="$FAKE_WORKER sleep 4000 exit 0"
MAXR=1
NOT_NEEDED="job finished; this spare (.*) was not needed; exiting with status 0"

# agent NAME LOCAL_ADDR BACKEND ENDPOINT: one agent of job $JOB, running
# $WORKER_<NAME> if set, else $WORKER.
agent() {
	eval "_w=\${WORKER_$1:-\$WORKER}"
	"$CRUN" --nnodes=2 --nproc_per_node=1 --max_restarts=$MAXR --rdzv_backend="$3" \
		--rdzv_endpoint="$4" --rdzv_id="$JOB" --local_addr="$2" \
		--rdzv_conf="$CONF" $_w >"$T/$JOB.$1.out" 2>&1 &
	eval "pid_$1=\$!"
	at_exit "kill -KILL \$pid_$1"
}
# status NAME WANT: the agent exits within 60 s with status WANT.
status() {
	eval "_p=\$pid_$1"
	wait_pid 60 "$_p" "$T/$JOB.$1.out"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$JOB".?.out >&2; fail "$JOB: agent $1 exited $_rc, want $2"; }
}
# three BACKEND ENDPOINT: a and b form round 0, then c comes and waits.
three() {
	agent a 127.0.0.1 "$1" "$2"
	[ "$1" = c10d ] && { wait_for 10 listening "${2##*:}" || fail "$JOB: no store host"; }
	agent b 127.0.0.2 "$1" "$2"
	wait_for 20 grep -q "round 0: group rank" "$T/$JOB.b.out" ||
		{ cat "$T/$JOB".?.out >&2; fail "$JOB: round 0 never formed"; }
	agent c 127.0.0.3 "$1" "$2"
	wait_for 20 grep -q "waits as a spare" "$T/$JOB.c.out" ||
		{ cat "$T/$JOB".?.out >&2; fail "$JOB: c did not wait as a spare"; }
}
# run BACKEND ENDPOINT: the job succeeds; the spare was not needed.
run() {
	three "$@"
	"$CRUN" status --rdzv_backend="$1" --rdzv_endpoint="$2" --rdzv_id="$JOB" \
		>"$T/$JOB.st" 2>&1 || { cat "$T/$JOB.st" >&2; fail "$JOB: crun status failed"; }
	expect_grep "$JOB: status counts the spare" "nodes 2 (min 2, max 2), 1 spare waiting" "$T/$JOB.st"
	expect_grep "$JOB: status lists c as a spare" "^  spare .* 127\.0\.0\.3 .* waiting for a place" "$T/$JOB.st"
	expect_eq "$JOB: status lists 2 nodes and 1 spare" "$(grep -c '^  [0-9s]' "$T/$JOB.st")" 3
	for x in a b c; do status $x 0; done
	expect_grep "$JOB: c says it was not needed" "$NOT_NEEDED" "$T/$JOB.c.out"
	expect_nogrep "$JOB: c ran no worker" "round [0-9]*: group rank" "$T/$JOB.c.out"
	for x in a b; do
		expect_grep "$JOB: $x succeeded" "1 worker of .* succeeded" "$T/$JOB.$x.out"
	done
}

# lost BACKEND ENDPOINT: b's agent is killed in round 0; c takes its place.
lost() {
	WORKER="$FAKE_WORKER hang-if-attempt 0 exit 0"
	three "$@"
	kill -KILL "$pid_b"
	for x in a c; do status $x 0; done
	expect_grep "$JOB: a re-formed with the spare" "re-forming the group (.*group rank 1.*; a spare takes its place); no restart is spent" "$T/$JOB.a.out"
	expect_grep "$JOB: a kept group rank 0" "round 1: group rank 0 of 2" "$T/$JOB.a.out"
	expect_grep "$JOB: c took group rank 1" "round 1: group rank 1 of 2" "$T/$JOB.c.out"
	expect_grep "$JOB: c's worker succeeded" "1 worker of .* succeeded" "$T/$JOB.c.out"
}
# failed BACKEND ENDPOINT: every worker exits 3, no restart: all exit 3.
failed() {
	WORKER="$FAKE_WORKER sleep 4000 exit 3" MAXR=0
	three "$@"
	for x in a b c; do status $x 3; done
	expect_grep "$JOB: c says the job stopped" "job stopped (3 .*) while .* waited as a spare.*; exiting with status 3" "$T/$JOB.c.out"
	expect_nogrep "$JOB: c ran no worker" "round [0-9]*: group rank" "$T/$JOB.c.out"
	WORKER="$FAKE_WORKER sleep 4000 exit 0" MAXR=1
}

JOB=spc10d
run c10d "127.0.0.1:$(free_port)"
note "1. c10d: a and b succeeded, the spare c exited 0, not needed"
JOB=splost
lost c10d "127.0.0.1:$(free_port)"
note "3. c10d: b killed; the spare c took its place in round 1, both exited 0"
JOB=spfail
failed c10d "127.0.0.1:$(free_port)"
note "4. c10d: the job failed with status 3, and so did its spare"
JOB=spexcl CONF="$CONF,exclude_after=2,exclude_for=600" MAXR=3 \
	WORKER_b="$FAKE_WORKER sleep 3000 exit 3"
three c10d "127.0.0.1:$(free_port)"
for x in a b c; do status $x 0; done
expect_grep "spexcl: b was left out" "is left out until .*: the last 2 failure-ended rounds (to round 1) failed first on it" "$T/spexcl.b.out"
expect_grep "spexcl: c took its place" "round 2: group rank 1 of 2" "$T/spexcl.c.out"
expect_grep "spexcl: c's worker succeeded" "1 worker of .* succeeded" "$T/spexcl.c.out"
expect_grep "spexcl: b's exit line" "the job finished without .*, which was left out after repeated failures" "$T/spexcl.b.out"
CONF="last_call_timeout=1,join_timeout=30,keep_alive_interval=0.2" MAXR=1 WORKER_b=
note "7. c10d: b left out after failing rounds 0 and 1; the spare c took its place; all exited 0"

need_etcd
etcd_cluster 1
JOB=spetcd
run etcd "$ETCD_EP"
note "2. etcd: a and b succeeded, the spare c exited 0, not needed"
JOB=splostetcd
lost etcd "$ETCD_EP"
note "5. etcd: b killed; the spare c took its place in round 1, both exited 0"
JOB=spfailetcd
failed etcd "$ETCD_EP"
note "6. etcd: the job failed with status 3, and so did its spare"
exit 0
