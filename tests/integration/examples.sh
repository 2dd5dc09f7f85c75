#!/bin/sh
# needs: torch
# The shipped example and job files run as a new user runs them, from the
# repository root: examples/train.py (gloo DDP that checkpoints and resumes
# after a restart), configs/single-node.ini exactly as written, the two-node
# and elastic job files as two agents on loopback (only the endpoint's port is
# replaced by a free one, so parallel runs cannot collide). Also how Python
# workers find their interpreter: $PYTHON_EXEC, else the first python3 or
# torchrun interpreter on PATH that can import torch, said in one line.
. tests/integration/lib.sh
need_torch

unset PET_NPROC_PER_NODE PET_NNODES PET_MAX_RESTARTS PET_RDZV_ENDPOINT
unset SLURM_JOB_ID SLURM_JOB_NUM_NODES SLURM_NNODES SLURM_JOB_NODELIST SLURM_STEP_ID
export TMPDIR="$T"
TORCH_PY=$PYTHON # an interpreter known to have torch (the suite's choice)
# crun itself runs without $PYTHON/$PYTHON_EXEC unless a check sets one.
crun() { env -u PYTHON -u PYTHON_EXEC "$CRUN" "$@"; }

# --- interpreter choice ---------------------------------------------------
# A PATH whose first python3 cannot import torch (like a pyenv shim of a
# Python without torch) and whose second one can.
mkdir -p "$T/nobin" "$T/torchbin"
cat >"$T/nobin/python3" <<'EOF'
#!/bin/sh
# A Python without torch: answers the probe "no", runs nothing else.
case "$*" in *find_spec*) printf no; exit 0 ;; esac
echo "wrong interpreter ran the worker: $*" >&2
exit 99
EOF
chmod +x "$T/nobin/python3"
ln -s "$TORCH_PY" "$T/torchbin/python3"
cat >"$T/rank.py" <<'EOF'
import os, sys
print("worker rank", os.environ["RANK"], "under", sys.executable, flush=True)
EOF
P0=$PATH
PATH="$T/nobin:$T/torchbin:$P0" crun --standalone --nproc_per_node=2 "$T/rank.py" >"$T/choice.out" 2>&1 ||
	{ cat "$T/choice.out"; fail "a torch-less first python3 on PATH was used"; }
# The PATH's second python3, or torchrun's interpreter (tried before it).
expect_grep "choice announced" "python workers run under [^ ]*python3[.0-9]* (it can import torch; $T/nobin/python3 (first on PATH) cannot" "$T/choice.out"
expect_eq "both ranks ran" "$(grep -c '^worker rank' "$T/choice.out")" 2
PATH="$T/nobin:$T/torchbin:$P0" crun --standalone --print-config "$T/rank.py" >"$T/pc" 2>&1
expect_grep "--print-config shows the interpreter" "^python  *= [^ ]*python3[.0-9]*  *# it can import torch; $T/nobin" "$T/pc"

# PYTHON_EXEC (torchrun's variable) wins, without asking anything.
PATH="$T/torchbin:$P0" env -u PYTHON PYTHON_EXEC="$T/nobin/python3" "$CRUN" --standalone "$T/rank.py" >"$T/pe.out" 2>&1
expect_eq "PYTHON_EXEC honoured (its interpreter ran the worker)" "$?" 99
expect_grep "PYTHON_EXEC's interpreter ran" "wrong interpreter ran the worker" "$T/pe.out"
expect_nogrep "no probe with PYTHON_EXEC" "python workers run under" "$T/pe.out"

# A script without .py that is not executable runs under Python too.
cp "$T/rank.py" "$T/plain_script"
chmod 644 "$T/plain_script"
PATH="$T/torchbin:$P0" crun --standalone "$T/plain_script" >"$T/plain.out" 2>&1 ||
	{ cat "$T/plain.out"; fail "non-executable script without .py did not run"; }
expect_grep "plain script ran under python" "^worker rank 0 under" "$T/plain.out"

# --- examples/train.py: checkpoint, failure, restart, resume ---------------
PATH="$T/torchbin:$P0" crun --standalone --nproc_per_node=2 --max_restarts=1 \
	examples/train.py --epochs 3 --steps-per-epoch 5 --checkpoint-dir "$T/ck" --resume \
	--fail-at-epoch 1 >"$T/train.out" 2>&1 || { cat "$T/train.out"; fail "train.py with one failure did not finish"; }
expect_grep "first attempt failed on purpose" "failing on purpose at epoch 1" "$T/train.out"
expect_grep "restarted" "restarting the worker group (restart 1 of 1)" "$T/train.out"
expect_eq "both ranks resumed from the epoch-0 checkpoint" \
	"$(grep -c 'resumed from .*/ck/crun-example.pt at epoch 1 (restart 1)' "$T/train.out")" 2
expect_nogrep "no epoch 0 after the restart" "restart 1).*epoch 0" "$T/train.out"
expect_eq "epochs 1 and 2 ran after the restart on both ranks" "$(grep -c '^rank [01]/2 epoch [12] ' "$T/train.out")" 4
expect_eq "replicas in sync" "$(grep -c 'replicas in sync: True' "$T/train.out")" 2

# --- configs/single-node.ini, exactly as written ---------------------------
PATH="$T/torchbin:$P0" crun configs/single-node.ini >"$T/single.out" 2>&1 ||
	{ tail -n 30 "$T/single.out"; fail "configs/single-node.ini did not run as written"; }
expect_eq "4 ranks, 3 epochs" "$(grep -c '^\[default[0-3]\]:rank [0-3]/4 epoch [0-2] ' "$T/single.out")" 12
expect_eq "single-node replicas in sync" "$(grep -c 'replicas in sync: True' "$T/single.out")" 4
ls "$T"/crun-logs/*/attempt_0/0/stdout.log >/dev/null 2>&1 || fail "single-node.ini's log dir was not written"

# --- configs/two-node-hetero.ini: two agents, 4 + 2 ranks ------------------
PORT=$(free_port)
PATH="$T/torchbin:$P0" crun --config configs/two-node-hetero.ini --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_id=hetero-$$ >"$T/h0.out" 2>&1 &
h0=$!
wait_for 20 listening "$PORT" || fail "two-node-hetero.ini's first agent never served the rendezvous"
PATH="$T/torchbin:$P0" timeout 120 env -u PYTHON -u PYTHON_EXEC "$CRUN" --config configs/two-node-hetero.ini --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_id=hetero-$$ --nproc_per_node=2 >"$T/h1.out" 2>&1
rc1=$?
timeout 60 sh -c "while kill -0 $h0 2>/dev/null; do sleep 0.1; done" || { kill -9 $h0; fail "first agent hung"; }
wait $h0; rc0=$?
[ $rc0 -eq 0 ] && [ $rc1 -eq 0 ] || { tail -n 20 "$T/h0.out" "$T/h1.out"; fail "two-node-hetero.ini: exit $rc0/$rc1"; }
expect_grep "hetero: 6 ranks on node 0 (filter = 0: its local rank 0 only)" "^\[trainer0\]:rank 0/6 epoch 2 " "$T/h0.out"
expect_grep "hetero: node 1's local rank 0 is rank 4" "^\[trainer0\]:rank 4/6 epoch 2 " "$T/h1.out"

# --- configs/elastic.ini: two agents (MIN) form the job; the last call is
# shortened so the test does not wait 30 s for a third node that never comes.
PORT=$(free_port)
for n in 0 1; do
	PATH="$T/torchbin:$P0" CKPT_DIR="$T/eck" JOB_ID="elastic-$$" EPOCHS=2 timeout 120 \
		env -u PYTHON -u PYTHON_EXEC "$CRUN" --config configs/elastic.ini --rdzv_endpoint=127.0.0.1:$PORT \
		--rdzv_conf=last_call_timeout=1,join_timeout=60 >"$T/e$n.out" 2>&1 &
	eval "e$n=\$!"
	[ $n -eq 0 ] && { wait_for 20 listening "$PORT" || fail "elastic.ini's first agent never served"; }
done
wait $e0; r0=$?
wait $e1; r1=$?
[ $r0 -eq 0 ] && [ $r1 -eq 0 ] || { tail -n 20 "$T/e0.out" "$T/e1.out"; fail "elastic.ini: exit $r0/$r1"; }
[ -f "$T/eck/elastic-$$.pt" ] || fail "elastic.ini: no checkpoint written to CKPT_DIR"
expect_grep "elastic: rank 0 reached the console (tee = 0:3)" "rank 0/4 epoch 1 " "$T/e0.out"
exit 0
