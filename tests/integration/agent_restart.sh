#!/bin/sh
# Failure handling on one node: restart counting, exit-code propagation,
# and the root-cause report (error file, stderr tail, JSON).
. tests/integration/lib.sh

# A worker failing on attempt 0 only: one restart, then success.
"$CRUN" --nproc_per_node=2 --max_restarts=3 \
	"$FAKE_WORKER" append "$T/runs" run fail-if-attempt 0 5 \
	>"$T/out" 2>&1 || fail "restart run exited $?: $(cat "$T/out")"
# Both ranks fail on attempt 0 (the second may be stopped before it writes);
# both ranks run attempt 1, and nothing runs a third time.
expect_grep "attempt 0 ran" "^run [01] 0$" "$T/runs"
expect_eq "attempt 1 ran" "$(grep ' 1$' "$T/runs" | sort | tr '\n' ' ')" "run 0 1 run 1 1 "
expect_nogrep "no attempt 2" " 2$" "$T/runs"
expect_grep "restart line" "restarting the worker group (restart 1 of 3)" "$T/out"

# Restarts exhausted: 1 + max_restarts attempts, then the worker's own code.
"$CRUN" --nproc_per_node=2 --max_restarts=2 --log_dir="$T/logs" --rdzv_id=job1 \
	"$FAKE_WORKER" append "$T/runs2" run fail-if-rank 1 7 sleep 5000 >"$T/out2" 2>&1
expect_eq "exit status is the worker's" "$?" 7
expect_eq "attempts" "$(grep -c 'run 1' "$T/runs2")" 3
expect_grep "status line" "exiting with status 7 (that of rank 1)" "$T/out2"
expect_grep "report title" "fake_worker FAILED" "$T/out2"
expect_grep "root cause" "Root Cause (first observed failure):" "$T/out2"
expect_grep "rank line" "rank      : 1 (local_rank: 1)" "$T/out2"
expect_grep "attempt_2 kept" "attempt_2" "$T/out2"
[ -d "$(echo "$T"/logs/job1_*)/attempt_0" ] && [ -d "$(echo "$T"/logs/job1_*)/attempt_1" ] || fail "earlier attempts' logs missing"
"$PYTHON" - "$(echo "$T"/logs/job1_*)/attempt_2/failures.json" <<'PY' || fail "failures.json"
import json, sys
d = json.load(open(sys.argv[1]))
f = d["failures"][d["root_cause"]]
assert f["rank"] == 1 and f["exitcode"] == 7 and f["signal"] == 0, f
assert len(d["failures"]) == 1, d   # rank 0 was stopped by crun, not failed
PY

# Death by signal: 128+N, named in the report, stderr tail shown.
"$CRUN" --nproc_per_node=1 "$FAKE_WORKER" eprint "about to crash" signal SEGV >"$T/out3" 2>&1
expect_eq "SIGSEGV status" "$?" 139
expect_grep "signal name" "signal 11: SIGSEGV" "$T/out3"
expect_grep "stderr tail" "    about to crash" "$T/out3"

# An error file written by the worker is the traceback (no @record needed).
"$CRUN" --nproc_per_node=1 "$FAKE_WORKER" errorfile "cuda went away" exit 1 >"$T/out4" 2>&1
expect_eq "error file status" "$?" 1
expect_grep "message" "message   : RuntimeError: cuda went away" "$T/out4"
expect_grep "traceback" 'File "train.py", line 1' "$T/out4"
expect_nogrep "error_file N/A" "error_file: <N/A>" "$T/out4"

# A worker that cannot be executed (its interpreter is missing): reported
# with the reason, status 127 like a shell, nothing hangs.
printf '#!/nonexistent/interpreter\n' >"$T/badexec"
chmod +x "$T/badexec"
t_before=$(date +%Y-%m-%d_%H:%M:%S)
"$CRUN" --nproc_per_node=2 "$T/badexec" >"$T/out5" 2>&1
rc=$?
t_after=$(date +%Y-%m-%d_%H:%M:%S)
expect_eq "exec failure status" "$rc" 127
expect_grep "exec failure reason" "cannot execute '$T/badexec': its interpreter '/nonexistent/interpreter' does not exist" "$T/out5"
# The failure's time is the local time of the failure, to the second.
ts=$(sed -n 's/^  time      : //p' "$T/out5" | head -n 1)
case "$ts" in [0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]_[0-9][0-9]:[0-9][0-9]:[0-9][0-9]) ;; *) fail "exec failure time '$ts' is not YYYY-MM-DD_HH:MM:SS" ;; esac
{ [ "$ts" = "$t_before" ] || [ "$ts" \> "$t_before" ]; } && { [ "$ts" = "$t_after" ] || [ "$ts" \< "$t_after" ]; } ||
	fail "exec failure time $ts not within the run ($t_before .. $t_after)"
exit 0
