#!/bin/sh
# A real one-node SLURM cluster (munged, slurmctld, slurmd started by
# lib_slurm.sh inside this test's temp dir): srun delivers the SLURM_*
# variables crun relies on, and `srun scripts/crun-slurm` runs crun in the
# step, which reads them and starts the workers. Needs root.
. tests/integration/lib.sh
. tests/integration/lib_slurm.sh

slurm_need
slurm_start_single

# 1. The step environment crun's SLURM detection reads (spec C1).
srun -N1 -n1 --job-name=envcheck env >"$T/step.env" 2>"$T/step.err" ||
	{ cat "$T/step.err" >&2; slurm_fail "srun -N1 -n1 env failed"; }
for v in SLURM_JOB_ID SLURM_STEP_ID SLURM_PROCID SLURM_LOCALID SLURM_TASKS_PER_NODE; do
	expect_grep "step variable $v" "^$v=" "$T/step.env"
done
expect_grep "node list" "^SLURM_JOB_NODELIST=$SLURM_NODE\$" "$T/step.env"
expect_grep "step node list" "^SLURM_STEP_NODELIST=$SLURM_NODE\$" "$T/step.env"
expect_grep "node count" "^SLURM_JOB_NUM_NODES=1\$" "$T/step.env"
expect_grep "node id" "^SLURM_NODEID=0\$" "$T/step.env"
expect_grep "task rank" "^SLURM_PROCID=0\$" "$T/step.env"
expect_grep "step id" "^SLURM_STEP_ID=0\$" "$T/step.env"
jobid=$(sed -n 's/^SLURM_JOB_ID=//p' "$T/step.env")
note "srun env: job $jobid on $SLURM_NODE"

# Two tasks on one node: srun really runs both, ranks 0 and 1.
srun -N1 -n2 sh -c 'echo "rank=$SLURM_PROCID local=$SLURM_LOCALID tpn=$SLURM_TASKS_PER_NODE"' \
	>"$T/two.out" 2>&1 || { cat "$T/two.out" >&2; slurm_fail "srun -N1 -n2 failed"; }
expect_grep "task 0" "^rank=0 local=0 tpn=2\$" "$T/two.out"
expect_grep "task 1" "^rank=1 local=1 tpn=2\$" "$T/two.out"

# 2. crun inside the step, through the wrapper.
[ -x "$CRUN" ] || skip "no crun binary at $CRUN (make first); the SLURM cluster itself works"
[ -x scripts/crun-slurm ] || skip "no scripts/crun-slurm"
if [ -x "$FAKE_WORKER" ]; then
	worker="$FAKE_WORKER env $T/w"
else
	# Until tests/helpers/fake_worker exists: the same contract in sh.
	printf '#!/bin/sh\nenv | sort >"$1.$LOCAL_RANK"\n' >"$T/envdump"
	chmod +x "$T/envdump"
	worker="--no_python $T/envdump $T/w"
fi
export CRUN_BIN="$CRUN"
# shellcheck disable=SC2086 # worker is split on purpose
srun -N1 --ntasks-per-node=1 --job-name=crun scripts/crun-slurm \
	--nproc_per_node=2 $worker >"$T/crun.out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$T/crun.out" >&2; slurm_fail "srun scripts/crun-slurm exited $rc"; }
for r in 0 1; do
	[ -f "$T/w.$r" ] || { cat "$T/crun.out" >&2; fail "worker $r wrote no environment ($T/w.$r)"; }
	expect_grep "worker $r LOCAL_RANK" "^LOCAL_RANK=$r\$" "$T/w.$r"
	expect_grep "worker $r RANK" "^RANK=$r\$" "$T/w.$r"
	expect_grep "worker $r WORLD_SIZE" "^WORLD_SIZE=2\$" "$T/w.$r"
	expect_grep "worker $r LOCAL_WORLD_SIZE" "^LOCAL_WORLD_SIZE=2\$" "$T/w.$r"
	expect_grep "worker $r GROUP_RANK" "^GROUP_RANK=0\$" "$T/w.$r"
	# The step's variables reach the workers unchanged.
	expect_grep "worker $r SLURM_PROCID" "^SLURM_PROCID=0\$" "$T/w.$r"
	expect_grep "worker $r SLURM_JOB_NODELIST" "^SLURM_JOB_NODELIST=$SLURM_NODE\$" "$T/w.$r"
done
crunjob=$(sed -n 's/^SLURM_JOB_ID=//p' "$T/w.0")
# Inside a SLURM job the rendezvous id is the job id (src/cfg/cfg_slurm.c offers
# SLURM_JOB_ID as --rdzv_id), and so the workers' TORCHELASTIC_RUN_ID.
expect_eq "rendezvous id = SLURM job id" "$(sed -n 's/^TORCHELASTIC_RUN_ID=//p' "$T/w.0")" "$crunjob"
note "crun-slurm ran 2 workers in job $crunjob"

# 3. The batch template: sbatch --ntasks-per-node=2 on one node. The step
# runs one crun (SLURM_STEP_TASKS_PER_NODE=1) and sees the job's layout saved as
# CRUN_SLURM_TASKS_PER_NODE=2. Logs go under $T (--chdir), crun-slurm is
# found in the submit directory.
mkdir -p "$T/batch/logs"
rm -f "$T"/w.*
CRUN_ARGS="--nproc_per_node=2" sbatch --wait --nodes=1 --ntasks-per-node=2 \
	--chdir="$T/batch" --output="$T/batch/out" --error="$T/batch/err" \
	scripts/crun.sbatch $worker >"$T/sbatch.out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$T/sbatch.out" "$T/batch/out" "$T/batch/err" >&2; slurm_fail "sbatch scripts/crun.sbatch exited $rc"; }
expect_grep "template banner" "tasks per node 2" "$T/batch/out"
for r in 0 1; do
	[ -f "$T/w.$r" ] || { cat "$T/batch/out" "$T/batch/err" >&2; fail "batch worker $r wrote no environment"; }
	expect_grep "batch worker $r saved layout" "^CRUN_SLURM_TASKS_PER_NODE=2\$" "$T/w.$r"
	expect_grep "batch worker $r step layout" "^SLURM_STEP_TASKS_PER_NODE=1\$" "$T/w.$r"
	expect_grep "batch worker $r WORLD_SIZE" "^WORLD_SIZE=2\$" "$T/w.$r"
done
note "crun.sbatch ran 2 workers"
exit 0
