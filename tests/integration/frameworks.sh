#!/bin/sh
# The frameworks people launch with torchrun, unmodified, under crun, with the
# test venv's PyTorch 2.x and the packages of tests/requirements-frameworks.txt
# (FRAMEWORKS_PYTHON, default .venv/bin/python: run once, not per interpreter
# of TORCH_PYTHONS, as Lightning 2.6 and accelerate 1.15 need PyTorch 2.x),
# two agents on loopback standing for two nodes:
#   1. PyTorch Lightning's Trainer, DDP (gloo, CPU), 2 nodes x 2 workers: it
#      detects torchelastic's environment and trains, weights in step;
#   2. HF accelerate's Accelerator() in a plain script, 2 workers;
#   3. torch.distributed.checkpoint saved by 4 ranks (2 nodes x 2), one node
#      killed mid-run, the survivor re-forms with 2 ranks and resumes from the
#      checkpoint with the new world size.
. tests/integration/lib.sh
PYTHON=${FRAMEWORKS_PYTHON:-$TOP/.venv/bin/python}
[ -x "$PYTHON" ] || fail "no $PYTHON (make test-venv, or set FRAMEWORKS_PYTHON)"
for m in lightning accelerate torch.distributed.checkpoint; do
	"$PYTHON" -c "import $m" 2>/dev/null ||
		fail "no $m in $PYTHON (pip install --no-deps -r tests/requirements.txt -r tests/requirements-frameworks.txt)"
done
PY=$TOP/tests/integration/py
export PYTHON
# agent NAME ARGS...: one crun agent in the background, its pid in pid_NAME.
agent() {
	_n=$1; shift
	"$CRUN" --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" \
		--rdzv_id="$JOB" "$@" >"$T/$_n.out" 2>&1 &
	eval "pid_$_n=\$!"
	at_exit "kill -KILL \$pid_$_n"
}
# two JOB ARGS...: agent a (the store host), then agent b.
two() {
	PORT=$(free_port) JOB=$1; shift
	agent a "$@"
	wait_for 30 listening "$PORT" || { cat "$T/a.out" >&2; fail "$JOB: no store host"; }
	agent b "$@"
}
status() { # NAME WANT SECONDS
	eval "_p=\$pid_$1"
	wait_pid "$3" "$_p" "$T/$1.out"; _rc=$?
	[ "$_rc" = "$2" ] || { tail -n 30 "$T/$1.out" >&2; fail "$JOB: agent $1 exited $_rc, want $2"; }
}

# --- 1. Lightning ------------------------------------------------------------------
two lightning --nnodes=2 "$PY/fw_lightning.py" "$T/lt" 2
status a 0 300
status b 0 60
for r in 0 1 2 3; do
	[ -f "$T/lt.$r" ] || fail "lightning: rank $r wrote no result"
	read -r env world rank node sum <"$T/lt.$r"
	expect_eq "lightning rank $r: cluster environment" "$env" TorchElasticEnvironment
	expect_eq "lightning rank $r: world size" "$world" 4
	expect_eq "lightning rank $r: global rank" "$rank" "$r"
	expect_eq "lightning rank $r: node rank" "$node" $((r / 2))
	[ $r = 0 ] && sum0=$sum
	expect_eq "lightning rank $r: weights as rank 0's (DDP in step)" "$sum" "$sum0"
done
note "1. lightning: 4 ranks on 2 nodes trained, weights $sum0 on each"

# --- 2. accelerate ---------------------------------------------------------------
ACCELERATE_USE_CPU=1 timeout 300 "$CRUN" --standalone --nproc_per_node=2 \
	"$PY/fw_accelerate.py" "$T/acc" >"$T/acc.out" 2>&1 ||
	{ rc=$?; tail -n 30 "$T/acc.out" >&2; fail "accelerate: crun exited $rc"; }
for r in 0 1; do
	[ -f "$T/acc.$r" ] || fail "accelerate: process $r wrote no result"
	read -r type n idx gathered sum <"$T/acc.$r"
	expect_eq "accelerate $r: distributed type" "$type" DistributedType.MULTI_CPU
	expect_eq "accelerate $r: processes" "$n" 2
	expect_eq "accelerate $r: index" "$idx" "$r"
	expect_eq "accelerate $r: gathered" "$gathered" 0,1
	[ $r = 0 ] && sum0=$sum
	expect_eq "accelerate $r: weights as process 0's" "$sum" "$sum0"
done
note "2. accelerate: 2 processes, MULTI_CPU"

# --- 3. torch.distributed.checkpoint across a scale-down -----------------------------
mkdir "$T/ck"
two dcp --nnodes=1:2 --max_restarts=2 --rdzv_conf=last_call_timeout=3 \
	"$PY/fw_dcp.py" "$T/ck" "$T/dc" 2 5
saved2() { [ "$(cat "$T/ck/latest" 2>/dev/null)" = 2 ]; }
wait_for 240 saved2 || { tail -n 20 "$T/a.out" "$T/b.out" >&2; fail "dcp: step 2 never saved"; }
kill -KILL "$pid_b"
status a 0 240
expect_grep "dcp: the node loss seen" "round 0 ended: .* disconnected" "$T/a.out"
expect_grep "dcp: re-formed with 2 ranks" "round 1: group rank 0 of 1, ranks 0-1 of 2" "$T/a.out"
expect_eq "dcp: step 2 saved by 4 ranks" "$(ls "$T/ck/step_2" | grep -c '\.distcp$')" 4
expect_eq "dcp: step 3 saved by 2 ranks" "$(ls "$T/ck/step_3" | grep -c '\.distcp$')" 2
for r in 0 1; do
	[ -f "$T/dc.$r" ] || { tail -n 20 "$T/a.out" >&2; fail "dcp: rank $r did not finish"; }
	expect_eq "dcp rank $r: world, loaded step, w, step" "$(cat "$T/dc.$r")" "2 2 5,5,5,5 5"
done
for r in 2 3; do [ ! -f "$T/dc.$r" ] || fail "dcp: rank $r of the lost node finished"; done
note "3. dcp: saved by 4 ranks at step 2, resumed by 2 ranks, step 5 reached"
exit 0
