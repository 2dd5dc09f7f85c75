#!/bin/sh
# --checkpoint_grace: a rank writing a checkpoint when the group must stop
# finishes it first; the others stop at once. A rank says so with the
# marker $CRUN_CHECKPOINT_FILE (created before it writes, removed after).
#   1. Rank 1 fails while rank 0 writes a 2 s checkpoint (grace 20 s):
#      rank 0's SIGTERM comes after its checkpoint is whole; crun says so
#      and exits 3 (rank 1's status).
#   2. SIGTERM to crun (a preempted node) during the checkpoint: the same,
#      and crun exits 143.
#   3. A checkpoint longer than the grace (1 s): rank 0 is stopped after
#      the grace, with one line saying so.
#   4. Without --checkpoint_grace: no marker variable, rank 0 is stopped at
#      once and its checkpoint is torn (the reason for the option).
#   5. Real PyTorch ($PYTHON's, Debian's 1.13 by default: this suite runs
#      once, its workers are shell scripts but for this part): rank 0's
#      torch.save to a slow file (2 s), rank 1 fails meanwhile: the
#      checkpoint loads with torch.load.
. tests/integration/lib.sh

# Rank 0 writes a checkpoint of $CKPT_S seconds (marker first), logging
# when TERM comes; rank 1 fails with 3 once rank 0's marker exists (or
# waits for crun's SIGTERM).
cat >"$T/w.sh" <<'EOS'
d=$1
if [ "$RANK" = 0 ]; then
	trap 'echo "TERM $(cat "$d/ckpt" 2>/dev/null)" >>"$d/log"; exit 0' TERM
	echo "marker ${CRUN_CHECKPOINT_FILE:-unset}" >>"$d/log"
	[ -n "$CRUN_CHECKPOINT_FILE" ] && : >"$CRUN_CHECKPOINT_FILE"
	echo begun >"$d/ckpt"
	echo writing >>"$d/log"
	i=0; while [ $i -lt $((CKPT_S * 10)) ]; do sleep 0.1; i=$((i + 1)); done
	echo whole >"$d/ckpt"
	echo written >>"$d/log"
	[ -n "$CRUN_CHECKPOINT_FILE" ] && rm -f "$CRUN_CHECKPOINT_FILE"
	while :; do sleep 0.1; done
fi
trap 'echo "rank1-TERM" >>"$d/log"; exit 0' TERM
while ! grep -q writing "$d/log" 2>/dev/null; do sleep 0.05; done
[ -n "$FAIL" ] && exit 3
while :; do sleep 0.1; done
EOS
# run NAME CKPT_S FAIL CRUN-FLAGS...: crun --standalone, 2 ranks, in the
# background (pid in $pid); $T/NAME/log, $T/NAME/ckpt.
run() {
	_n=$1; mkdir -p "$T/$1"
	CKPT_S=$2 FAIL=$3; shift 3
	CKPT_S=$CKPT_S FAIL=$FAIL "$CRUN" --standalone --nproc_per_node=2 "$@" \
		--no_python sh "$T/w.sh" "$T/$_n" >"$T/$_n.out" 2>&1 &
	pid=$!
	at_exit "kill -KILL $pid"
}
finish() { # NAME STATUS BOUND
	wait_pid "$3" "$pid" "$T/$1.out" "$T/$1/log"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$1.out" "$T/$1/log" >&2; fail "$1: crun exited $_rc, want $2"; }
}

run fail 2 1 --checkpoint_grace=20
finish fail 3 30
expect_grep "fail: a marker path" "^marker /.*0\.checkpointing$" "$T/fail/log"
expect_grep "fail: crun held rank 0" "1 rank is writing a checkpoint: its stop signal waits until it is written, at most 20 s (--checkpoint_grace)" "$T/fail.out"
expect_grep "fail: crun let it go" "rank 0 finished writing its checkpoint: stopping it" "$T/fail.out"
expect_eq "fail: rank 0's log" "$(tr '\n' ' ' <"$T/fail/log")" "marker $(sed -n 's/^marker //p' "$T/fail/log") writing written TERM whole "
note "1. rank 1 failed during rank 0's 2 s checkpoint: rank 0 got SIGTERM once it was whole; crun exited 3"

run term 2 "" --checkpoint_grace=20
wait_for 10 grep -q writing "$T/term/log" 2>/dev/null || fail "term: no checkpoint begun"
kill -TERM "$pid"
finish term 143 30
expect_eq "term: rank 1 stopped at once, rank 0 after its checkpoint" "$(sed 1d "$T/term/log" | tr '\n' ' ')" "writing rank1-TERM written TERM whole "
note "2. SIGTERM to crun during the checkpoint: rank 1 stopped at once, rank 0 once its checkpoint was whole; crun exited 143"

t0=$(date +%s%3N)
run short 30 1 --checkpoint_grace=1
finish short 3 15
expect_grep "short: the grace passed" "rank 0 is still writing its checkpoint after --checkpoint_grace=1 s: stopping it" "$T/short.out"
expect_grep "short: rank 0 stopped mid-checkpoint" "^TERM begun$" "$T/short/log"
note "3. a 30 s checkpoint, grace 1 s: rank 0 stopped after the grace; crun exited 3 in $(( $(date +%s%3N) - t0 )) ms"

run none 2 1
finish none 3 15
expect_grep "none: no marker variable" "^marker unset$" "$T/none/log"
expect_grep "none: torn checkpoint" "^TERM begun$" "$T/none/log"
expect_nogrep "none: no hold said" "checkpoint" "$T/none.out"
note "4. no --checkpoint_grace: rank 0 stopped at once, its checkpoint torn"

"$PYTHON" -c 'import torch' 2>/dev/null ||
	fail "no PyTorch in $PYTHON: part 5 cannot run (parts 1-4 ran; make deps installs it)"
cat >"$T/save.py" <<'EOS'
import os, sys, time
import torch
d = sys.argv[1]
if os.environ["RANK"] == "1":
    while not os.path.exists(os.path.join(d, "begun")):
        time.sleep(0.05)
    sys.exit(3)
class Slow:  # a slow disk: 200 KB/s, 2 s for this checkpoint
    def __init__(self, f): self.f = f
    def write(self, b): time.sleep(len(b) / 200e3); return self.f.write(b)
    def flush(self): self.f.flush()
state = {"w": torch.arange(100000, dtype=torch.float32), "step": 7}
ck = os.environ["CRUN_CHECKPOINT_FILE"]
open(ck, "w").close()                       # 1. say a checkpoint is being written
open(os.path.join(d, "begun"), "w").close()
with open(os.path.join(d, "ckpt.pt"), "wb") as f:
    torch.save(state, Slow(f), _use_new_zipfile_serialization=False)  # 2. write it
os.remove(ck)                               # 3. say it is written
time.sleep(60)
EOS
mkdir -p "$T/torch"
PYTHON="$PYTHON" "$CRUN" --standalone --nproc_per_node=2 --checkpoint_grace=20 "$T/save.py" "$T/torch" \
	>"$T/torch.out" 2>&1 &
pid=$!
finish torch 3 60
"$PYTHON" -c 'import sys, torch; s = torch.load(sys.argv[1]); assert s["step"] == 7 and torch.equal(s["w"], torch.arange(100000, dtype=torch.float32)), s' \
	"$T/torch/ckpt.pt" || { cat "$T/torch.out" >&2; fail "torch: the checkpoint does not load whole"; }
expect_grep "torch: rank 0 let go after its save" "rank 0 finished writing its checkpoint: stopping it" "$T/torch.out"
note "5. PyTorch: rank 1 failed during rank 0's slow torch.save; the checkpoint loads whole"
exit 0
