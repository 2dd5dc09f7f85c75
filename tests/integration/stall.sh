#!/bin/sh
# needs: torch
# The stall detector (--stall_timeout, agent/stall.c) with real gloo workers
# (tests/integration/py/stall_gloo.py): on the first attempt rank 3 skips an
# all_reduce and blocks, the others wait in it for ever (gloo's timeout is an
# hour there).
#   1. one node, 4 ranks, --stall_timeout=5 --max_restarts=1: the hang is
#      named within S + BOUND seconds of rank 3 blocking, in one line (rank 3
#      and the others' frame), in the event log, and the job restarts and
#      finishes 0.
#   2. rank 0 busy (a CPU loop) for 2 x S while the others wait in a
#      barrier: not a hang (the job finishes 0, nothing is called hung).
#   3. two hosts (network namespaces), 2+2 ranks: the store host's one line
#      names rank 3 on h2 and the others' frame; both nodes restart, exit 0.
# Stacks come from py-spy when it is beside the interpreter (the venv), else
# from faulthandler (PYTHONFAULTHANDLER=1, Debian's python).
. tests/integration/lib.sh

need_torch
S=5
BOUND=5 # s past S: one sample (1 s), the stacks, a loaded machine
W=$TOP/tests/integration/py/stall_gloo.py
PYTHON_EXEC=$PYTHON PYTHONFAULTHANDLER=1 STALL_DIR=$T
export PYTHON_EXEC PYTHONFAULTHANDLER STALL_DIR
hung() { grep -q "crun: hang: " "$1"; }
skipped() { grep -q "rank 3: skipping all_reduce" "$1"; }

# 1. one node
STALL_RANK=3 "$CRUN" --nproc_per_node=4 --stall_timeout=$S --max_restarts=1 \
	--event_log="$T/ev1" "$W" >"$T/one.out" 2>&1 &
pid=$!
at_exit "kill -KILL $pid"
wait_for 60 skipped "$T/one.out" || { cat "$T/one.out" >&2; fail "1: rank 3 never blocked"; }
ms=$(ms_until $(( (S + BOUND) * 1000 )) hung "$T/one.out") ||
	{ cat "$T/one.out" >&2; fail "1: hang named after $ms ms, want <= $((S + BOUND)) s"; }
note "1. one node: hang named $ms ms after rank 3 blocked (S = $S s)"
wait_pid 60 $pid "$T/one.out" || { cat "$T/one.out" >&2; fail "1: crun exited $?, want 0"; }
expect_grep "1: the job called hung" "crun: job hung: no rank progressed for $S s" "$T/one.out"
expect_grep "1: rank 3 named" "crun: hang: .*rank 3 in [^;]*(stall_gloo.py:[0-9]*)" "$T/one.out"
expect_grep "1: the others' frame" "crun: hang: .*ranks 0-2 in all_reduce (stall_gloo.py:[0-9]*)" "$T/one.out"
expect_grep "1: restarted" "the worker group hung; restarting it (restart 1 of 1)" "$T/one.out"
expect_grep "1: attempt 1 ran through" "rank 3: attempt 1 done" "$T/one.out"
expect_grep "1: hung in the event log" '"crun.job.hung"' "$T/ev1"
expect_grep "1: stopping for a stall" '"reason": *"stall"' "$T/ev1"
expect_grep "1: restart after a stall" '"after": *"stall"' "$T/ev1"

# 2. a busy rank 0 is no hang
STALL_BUSY=$((2 * S)) "$CRUN" --nproc_per_node=4 --stall_timeout=$S --max_restarts=1 \
	"$W" >"$T/busy.out" 2>&1 &
pid=$!
at_exit "kill -KILL $pid"
wait_pid 90 $pid "$T/busy.out" || { cat "$T/busy.out" >&2; fail "2: crun exited $?, want 0"; }
expect_nogrep "2: a busy rank 0 is no hang" "job hung" "$T/busy.out"
expect_grep "2: one generation" "generation 0" "$T/busy.out"
note "2. rank 0 busy $((2 * S)) s while 3 ranks wait in a barrier: no hang"

# 3. two hosts
. tests/integration/lib_netns.sh
netns_setup 2
PORT=29400 JOB=stall$$
for h in 1 2; do
	STALL_RANK=3 netns_spawn h$h "$T/h$h.out" "$CRUN" --nnodes=2 --nproc_per_node=2 \
		--rdzv_backend=c10d --rdzv_endpoint="h1:$PORT" --rdzv_id="$JOB" \
		--rdzv_conf=last_call_timeout=1,join_timeout=30 \
		--stall_timeout=$S --max_restarts=1 "$W"
	eval "pid_h$h=\$NETNS_PID"
done
wait_for 60 skipped "$T/h2.out" || { cat "$T/h1.out" "$T/h2.out" >&2; fail "3: rank 3 never blocked"; }
# While it hangs, `crun status` shows each node's last progress.
progress_shown() {
	netns_exec h2 "$CRUN" status --rdzv_endpoint="h1:$PORT" --rdzv_id="$JOB" --hb_wait=0 >"$T/status.out" 2>&1
	grep -q "^h2 group rank 1: last progress [0-9.]* s ago" "$T/status.out"
}
t0=$(now_ms)
wait_for 4 progress_shown || { cat "$T/status.out" >&2; fail "3: crun status shows no progress age"; }
gone=$(( $(now_ms) - t0 ))
ms=$(ms_until $(( (S + BOUND) * 1000 - gone )) hung "$T/h1.out") ||
	{ cat "$T/h1.out" "$T/h2.out" >&2; fail "3: hang named after $((ms + gone)) ms, want <= $((S + BOUND)) s"; }
ms=$((ms + gone))
note "3. two hosts: hang named by the store host $ms ms after rank 3 blocked"
wait_for 30 sh -c "grep -q 'attempt 1 running' '$T/h1.out'" || fail "3: no second attempt"
for h in 1 2; do
	eval "p=\$pid_h$h"
	wait_pid 60 "$p" "$T/h$h.out" || { cat "$T/h$h.out" >&2; fail "3: h$h exited $?, want 0"; }
done
expect_grep "3: rank 3 on h2" "crun: hang: .*rank 3 in [^;]*(stall_gloo.py:[0-9]*) on h2" "$T/h1.out"
expect_grep "3: the others' frame" "crun: hang: .*ranks 0-2 in all_reduce (stall_gloo.py:[0-9]*)" "$T/h1.out"
expect_nogrep "3: one summary, by the store host" "crun: hang: " "$T/h2.out"
for h in 1 2; do
	expect_grep "3: h$h called it hung" "crun: job hung: no rank progressed for $S s" "$T/h$h.out"
	expect_grep "3: h$h restarted" "re-forming the group: restart 1 of 1 after the job hung" "$T/h$h.out"
	expect_grep "3: h$h ran generation 1" "generation 1" "$T/h$h.out"
done

# 4. the same on the etcd backend (two agents on loopback), where etcd is
# installed
. tests/integration/lib_etcd.sh
if [ -x "$ETCD" ] && [ -x "$ETCDCTL" ]; then
	etcd_cluster 1
	for n in a b; do
		STALL_RANK=3 "$CRUN" --nnodes=2 --nproc_per_node=2 --rdzv_backend=etcd \
			--rdzv_endpoint="$ETCD_EP" --rdzv_id="stalletcd$$" \
			--rdzv_conf=last_call_timeout=1,join_timeout=30 \
			--stall_timeout=$S --max_restarts=1 "$W" >"$T/e$n.out" 2>&1 &
		eval "pid_e$n=\$!"
		at_exit "kill -KILL \$pid_e$n"
	done
	wait_for 60 sh -c "grep -q 'rank 3: skipping all_reduce' '$T/ea.out' '$T/eb.out'" ||
		{ cat "$T/ea.out" "$T/eb.out" >&2; fail "4: rank 3 never blocked"; }
	for n in a b; do
		eval "p=\$pid_e$n"
		wait_pid 90 "$p" "$T/e$n.out" || { cat "$T/e$n.out" >&2; fail "4: agent $n exited $?, want 0"; }
		expect_grep "4: $n called it hung" "crun: job hung: no rank progressed for $S s" "$T/e$n.out"
		expect_grep "4: $n restarted" "re-forming the group: restart 1 of 1 after the job hung" "$T/e$n.out"
	done
	cat "$T/ea.out" "$T/eb.out" >"$T/e.out"
	expect_grep "4: one summary line" "crun: hang: .*rank 3 in [^;]*(stall_gloo.py:[0-9]*)" "$T/e.out"
	note "4. etcd: the hang named, both nodes restarted"
else
	note "4. etcd: not installed, left out"
fi
