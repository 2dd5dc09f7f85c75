#!/bin/sh
# needs: torch
# The launcher's own error file: when crun's environment names
# TORCHELASTIC_ERROR_FILE (as a scheduler sets it for torchrun), a failed job
# leaves its root cause there in torchelastic's schema with "errorCode": the
# failed worker's own error file (written by @record) with its exit code, a
# synthesized entry when the worker wrote none, and why crun stopped when no
# worker failed (a rendezvous timeout). A successful job writes nothing.
. tests/integration/lib.sh

# json FILE EXPR: evaluate a Python expression over the parsed file as d.
json() { "$PYTHON" -c "import json,sys; d=json.load(open(sys.argv[1])); print($2)" "$1"; }

# 1. A worker exits 3 without an error file of its own.
TORCHELASTIC_ERROR_FILE=$T/e1.json "$CRUN" --standalone --nproc_per_node=2 \
	"$FAKE_WORKER" exit 3 >"$T/o1" 2>&1
expect_eq "exit status" "$?" 3
[ -f "$T/e1.json" ] || fail "no launcher error file after a worker failure"
expect_eq "errorCode" "$(json "$T/e1.json" 'd["message"]["errorCode"]')" 3
json "$T/e1.json" 'd["message"]["message"]' >"$T/m1"
expect_grep "message names the failed rank" "^ChildFailedError: .*fake_worker: rank \([01]\) (local rank \1, pid [0-9]*) on .* exited with 3$" "$T/m1"
expect_eq "timestamp is now" "$(json "$T/e1.json" 'abs(int(d["message"]["extraInfo"]["timestamp"]) - __import__("time").time()) < 120')" True

# 2. A Python worker decorated with @record: its file, errorCode overridden.
if "$PYTHON" -c 'import torch.distributed.elastic.multiprocessing.errors' 2>/dev/null; then
	cat >"$T/rec.py" <<'PY'
import os
from torch.distributed.elastic.multiprocessing.errors import record
@record
def main():
    if os.environ["LOCAL_RANK"] == "1":
        raise ValueError("boom in rank 1")
main()
PY
	TORCHELASTIC_ERROR_FILE=$T/e2.json "$CRUN" --standalone --nproc_per_node=2 "$T/rec.py" >"$T/o2" 2>&1
	expect_eq "exit status of the @record worker" "$?" 1
	expect_eq "worker's message kept" "$(json "$T/e2.json" 'd["message"]["message"]')" "ValueError: boom in rank 1"
	expect_eq "errorCode of the @record worker" "$(json "$T/e2.json" 'd["message"]["errorCode"]')" 1
	json "$T/e2.json" 'd["message"]["extraInfo"]["py_callstack"]' >"$T/cs2"
	expect_grep "worker's traceback kept" "boom in rank 1" "$T/cs2"
else
	fail "no PyTorch elastic in $PYTHON for the @record case"
fi

# 3. No worker ever ran: a lone node of a 2-node job times out joining.
PORT=$(free_port)
TORCHELASTIC_ERROR_FILE=$T/e3.json timeout 30 "$CRUN" --nnodes=2 --rdzv_backend=c10d \
	--rdzv_endpoint=127.0.0.1:$PORT --rdzv_conf=join_timeout=1 "$FAKE_WORKER" exit 0 >"$T/o3" 2>&1
expect_eq "exit status of the timed-out join" "$?" 1
expect_eq "errorCode of the timeout" "$(json "$T/e3.json" 'd["message"]["errorCode"]')" 1
json "$T/e3.json" 'd["message"]["message"]' >"$T/m3"
expect_grep "message says why crun stopped" "^crun: .*1 of 2\|^crun: .*join" "$T/m3"

# 4. Success: nothing written.
TORCHELASTIC_ERROR_FILE=$T/e4.json "$CRUN" --standalone "$FAKE_WORKER" exit 0 >"$T/o4" 2>&1 ||
	fail "successful job failed"
[ ! -e "$T/e4.json" ] || fail "error file written after a success"

# 5. -r without --log_dir: the files stay, and where they are is said once.
TMPDIR=$T "$CRUN" --standalone --nproc_per_node=2 -r 3 "$FAKE_WORKER" eprint hello-kept exit 0 >"$T/o5" 2>&1 ||
	{ cat "$T/o5"; fail "redirected job failed"; }
expect_eq "path said once" "$(grep -c 'worker logs go to ' "$T/o5")" 1
dir=$(sed -n "s/^crun: worker logs go to \(.*\) (no --log_dir given)$/\1/p" "$T/o5")
case "$dir" in "$T"/crun_*) ;; *) fail "logs not under TMPDIR: '$dir'" ;; esac
expect_grep "rank 1's stderr kept after success" "hello-kept" "$dir/attempt_0/1/stderr.log"
# Without redirects nothing is written, and the invented directory goes.
TMPDIR=$T/plain mkdir -p "$T/plain"
TMPDIR=$T/plain "$CRUN" --standalone "$FAKE_WORKER" exit 0 >"$T/o6" 2>&1 || fail "plain job failed"
expect_nogrep "no path said without files" "worker logs go to" "$T/o6"
expect_eq "nothing left but crun-<uid>" "$(ls -A "$T/plain")" "crun-$(id -u)"
expect_eq "crun-<uid> left empty" "$(ls -A "$T/plain/crun-$(id -u)")" ""
exit 0
