#!/bin/sh
# A hang with a stopped rank (--stall_timeout): rank 1 stops itself with
# SIGSTOP while rank 0 sleeps (tests/integration/py/stall_stopped.py). The
# hang line names rank 1 as stopped, rank 0's stack is taken without waiting
# for it, and the stop signal (SIGTERM, then SIGCONT) ends both at once: the
# job is over long before --shutdown_timeout=10 could pass (timeout 9 does
# not fire, crun never reaches its SIGKILL), and nothing of rank 1 is left.
. tests/integration/lib.sh

W=$TOP/tests/integration/py/stall_stopped.py
PYTHON_EXEC=$PYTHON PYTHONFAULTHANDLER=1
export PYTHON_EXEC PYTHONFAULTHANDLER

timeout 9 "$CRUN" --nproc_per_node=2 --stall_timeout=2 --shutdown_timeout=10 \
	"$W" "$T" >"$T/out" 2>&1
rc=$?
[ $rc -ne 124 ] || { cat "$T/out" >&2; fail "the job did not end within 9 s"; }
[ $rc -ne 0 ] || { cat "$T/out" >&2; fail "a hung job exited 0"; }
expect_grep "the job called hung" "crun: job hung: no rank progressed for 2 s" "$T/out"
expect_grep "rank 1 named stopped" "crun: hang: .*rank 1 in the stopped state (T: no stack taken)" "$T/out"
expect_nogrep "rank 1 not asked for a stack" "abandoned" "$T/out"
expect_nogrep "no SIGKILL after the shutdown timeout" "after the stop signal: sending SIGKILL" "$T/out"
pid=$(cat "$T/pid.1")
! kill -0 "$pid" 2>/dev/null || fail "rank 1 (pid $pid) outlived the job"
note "rank 1 stopped: named, and the job ended with status $rc"
