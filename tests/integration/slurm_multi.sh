#!/bin/sh
# needs: torch
# A real 2-node SLURM cluster in network namespaces (lib_slurm.sh's
# slurm_start_multi: hosts h1 and h2, slurmctld in h1, one slurmd per host).
#  1. srun -N2 --ntasks-per-node=1 scripts/crun-slurm: one crun per node, each
#     taking nnodes, rendezvous id and endpoint from the step (no multi-node
#     flags given); the workers of both nodes get the torchrun contract.
#  1b. srun ... --console=collapse,job: the step's output holds each line the
#     four ranks print alike once ([0-3]:), not once per node, and each
#     rank's own line once with its node (n1:[3]:).
#  2. sbatch scripts/crun.sbatch with a heterogeneous layout from SLURM itself:
#     -N2 -n3 gives SLURM_TASKS_PER_NODE=2,1, which the
#     template saves as CRUN_SLURM_TASKS_PER_NODE, so h1 runs 2 workers and h2
#     1, and the real PyTorch gloo DDP script completes on all 3 ranks.
# Needs root (namespaces, daemons).
. tests/integration/lib.sh
. tests/integration/lib_netns.sh
. tests/integration/lib_slurm.sh

slurm_need
[ -x "$CRUN" ] || skip "no crun binary at $CRUN (make first)"
[ -x "$FAKE_WORKER" ] || skip "no fake worker at $FAKE_WORKER (make first)"
slurm_start_multi 2
export CRUN_BIN="$CRUN"

v() { sed -n "s/^$1=//p" "$2"; }

# 1. srun: 2 workers per node, the env dump of each to $T/w.<host>.<local rank>.
printf '#!/bin/sh\nexec "%s" env "$1.$(hostname)"\n' "$FAKE_WORKER" >"$T/envw"
chmod +x "$T/envw"
slurm_client srun -N2 --ntasks-per-node=1 --job-name=crun-env scripts/crun-slurm \
	--nproc_per_node=2 --no_python "$T/envw" "$T/w" >"$T/srun.out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$T/srun.out" >&2; slurm_fail "srun -N2 scripts/crun-slurm exited $rc"; }
expect_grep "announced on node 0" "crun: SLURM job [0-9]*, node 0 of 2: --nnodes=2 --nproc_per_node=2 --rdzv_backend=c10d --rdzv_endpoint=h1:2[0-9]* " "$T/srun.out"
expect_grep "announced on node 1" "crun: SLURM job [0-9]*, node 1 of 2:" "$T/srun.out"
for f in w.h1.0 w.h1.1 w.h2.0 w.h2.1; do
	[ -f "$T/$f" ] || { cat "$T/srun.out" >&2; fail "no worker environment $T/$f"; }
done
job=$(v SLURM_JOB_ID "$T/w.h1.0")
expect_eq "every rank once" "$(cat "$T"/w.h* | sed -n 's/^RANK=//p' | sort -n | tr '\n' ' ')" "0 1 2 3 "
expect_eq "world size" "$(cat "$T"/w.h* | sed -n 's/^WORLD_SIZE=//p' | sort -u)" 4
expect_eq "group world size" "$(cat "$T"/w.h* | sed -n 's/^GROUP_WORLD_SIZE=//p' | sort -u)" 2
expect_eq "run id = job id" "$(cat "$T"/w.h* | sed -n 's/^TORCHELASTIC_RUN_ID=//p' | sort -u)" "$job"
expect_eq "one store for all" "$(cat "$T"/w.h* | sed -n 's/^MASTER_PORT=//p' | sort -u | wc -l)" 1
mport=$(v MASTER_PORT "$T/w.h1.0")
[ "$mport" -ge 1 ] && [ "$mport" -le 65535 ] ||
	fail "MASTER_PORT=$mport is not a TCP port (the store host's address is a name here: h1)"
expect_eq "SIGUSR1 handled under SLURM" "$(v TORCHELASTIC_SIGNALS_TO_HANDLE "$T/w.h1.0")" "SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"
for h in h1 h2; do
	expect_eq "$h local world size" "$(v LOCAL_WORLD_SIZE "$T/w.$h.1")" 2
	expect_eq "$h ran in its own step task" "$(v SLURMD_NODENAME "$T/w.$h.0")" "$h"
	expect_eq "$h GROUP_RANK = SLURM_NODEID" "$(v GROUP_RANK "$T/w.$h.0")" "$(v SLURM_NODEID "$T/w.$h.0")"
done
note "srun: job $job, ranks 0-3 on h1 and h2, run id $job"

# 1b. One console for the job: h1's (it hosts the rendezvous store).
printf '%s\n' 'echo "hello from every rank"' 'echo "own line of rank $RANK"' 'echo "bye"' >"$T/say"
slurm_client srun -N2 --ntasks-per-node=1 --job-name=crun-console scripts/crun-slurm \
	--nproc_per_node=2 --console=collapse,job --console_window=5 \
	--no_python sh "$T/say" >"$T/console.out" 2>"$T/console.err"
rc=$?
[ $rc -eq 0 ] || { cat "$T/console.out" "$T/console.err" >&2; slurm_fail "srun --console=collapse,job exited $rc"; }
for l in '[0-3]:hello from every rank' '[0-3]:bye' 'n0:[0]:own line of rank 0' \
	'n0:[1]:own line of rank 1' 'n1:[2]:own line of rank 2' 'n1:[3]:own line of rank 3'; do
	expect_eq "one console: $l" "$(grep -c -x -F -e "$l" "$T/console.out")" 1
done
expect_eq "one console: nothing else" "$(wc -l <"$T/console.out")" 6
note "srun --console=collapse,job: 6 lines for 4 ranks on 2 nodes (plain: 12)"

# 2. Preemption warning and requeue (scripts/crun.sbatch's contract): the
# batch shell gets SIGUSR1 (as from --signal=B:USR1@T; here kill),
# forwards it through srun to both crun, which pass it to the workers; crun
# exits 128+SIGUSR1 and the template, submitted with --requeue and
# CRUN_REQUEUE=1, requeues the job (it goes back to pending; when Slurm runs
# it again is Slurm's own scheduling, so the test cancels it there).
printf '%s\n' '#!/bin/sh' 'f=$1.$(hostname).$LOCAL_RANK; n=${SLURM_RESTART_COUNT:-0}' \
	'[ "$n" = 0 ] || exit 0' \
	'trap '"'"'echo "checkpoint rank $RANK" >>"$f"; exit 0'"'"' USR1' \
	'echo "run $n rank $RANK" >>"$f"' \
	'(trap "" USR1; exec sleep 120) & wait' >"$T/rq"
chmod +x "$T/rq"
mkdir -p "$T/rqb/logs"
rqjob=$(CRUN_REQUEUE=1 slurm_client sbatch --parsable --requeue --open-mode=append -N2 \
	--job-name=crun-rq --time=5 --chdir="$T/rqb" --output="$T/rqb/out" --error="$T/rqb/err" \
	scripts/crun.sbatch --no_python "$T/rq" "$T/rq" 2>"$T/rq.err") ||
	{ cat "$T/rq.err" >&2; slurm_fail "sbatch (requeue) failed"; }
started() { [ -f "$T/rq.h1.0" ] && [ -f "$T/rq.h2.0" ]; }
wait_for 30 started || { cat "$T/rqb/out" "$T/rqb/err" >&2; slurm_fail "requeue job $rqjob: workers did not start"; }
# (each worker sets its USR1 trap before it writes its first line; its
# sleep ignores USR1: Slurm signals the step's processes one by one, and a
# sleep killed first would end the shell's wait, and the shell, before its
# own signal came)
# The batch shell only, as --signal=B:USR1@T does (scancel --batch would also
# signal its children, srun among them): found by its script's path.
script=$SLURM_DIR/spool/h1/job$(printf %05d "$rqjob")/slurm_script
shpid=""
for d in /proc/[0-9]*; do
	tr '\0' ' ' <"$d/cmdline" 2>/dev/null | grep -q -F "$script" && { shpid=${d#/proc/}; break; }
done
[ -n "$shpid" ] || slurm_fail "no batch shell running $script"
kill -USR1 "$shpid" || fail "cannot signal the batch shell $shpid"
# A requeued job waits for a BeginTime in the future; make it eligible now.
pending() { [ "$(slurm_client squeue -h -j "$rqjob" -o %t 2>/dev/null)" = PD ] && grep -q requeueing "$T/rqb/err"; }
wait_for 60 pending || { cat "$T/rqb/out" "$T/rqb/err" >&2; slurm_fail "job $rqjob was not requeued"; }
slurm_client scancel "$rqjob" >/dev/null 2>&1
# Slurm signals every process of the step, so a worker may hear SIGUSR1
# before its crun does and finish; its crun, when it hosts the store, then
# keeps serving until the other node has left, so every worker gets SIGUSR1
# (multinode.sh's hostsig checks that without Slurm's timing).
for h in h1 h2; do
	grep -q "^checkpoint rank" "$T/rq.$h.0" ||
		{ cat "$T/rq.$h.0" "$T/rqb/err" >&2; fail "$h worker did not get SIGUSR1"; }
done
expect_grep "crun forwarded SIGUSR1" "received SIGUSR1: forwarding it to the workers" "$T/rqb/err"
# crun exits 128+SIGUSR1 on both nodes; when one node's crun is slower to
# exit (ASan), srun terminates it first and the step reports 128+SIGTERM.
expect_grep "requeued on crun's 128+SIGUSR1" "requeueing job $rqjob (crun exited \(138\|143\); warning signal seen: 1)" "$T/rqb/err"
note "requeue: job $rqjob warned with SIGUSR1, crun exited 138, requeued"

# 3. sbatch of the template, 2 + 1 workers, the real DDP script.
# Parts 1 and 2 already ran: a missing PyTorch now is a failure, not a skip.
"$PYTHON" -c 'import torch.distributed' 2>/dev/null ||
	fail "no PyTorch in $PYTHON: the DDP batch job cannot run (parts 1-2 ran)"
mkdir -p "$T/batch/logs" "$T/ddp"
CRUN_ARGS="--tee=3" slurm_client sbatch --wait --parsable -N2 -n3 \
	--job-name=crun-ddp --time=5 --chdir="$T/batch" \
	--output="$T/batch/out" --error="$T/batch/err" \
	scripts/crun.sbatch "$PWD/tests/integration/py/ddp_gloo.py" --out "$T/ddp" \
	>"$T/sbatch.out" 2>&1
rc=$?
[ $rc -eq 0 ] || { cat "$T/sbatch.out" "$T/batch/out" "$T/batch/err" >&2; slurm_fail "sbatch scripts/crun.sbatch exited $rc"; }
bjob=$(head -n 1 "$T/sbatch.out")
expect_grep "template banner: layout 2,1" "tasks per node 2,1" "$T/batch/out"
expect_grep "h1 runs 2 workers" "node 0 of 2: --nnodes=2 --nproc_per_node=2 " "$T/batch/err"
expect_grep "h2 runs 1 worker" "node 1 of 2: --nnodes=2 --nproc_per_node=1 " "$T/batch/err"
for r in 0 1 2; do
	[ -f "$T/ddp/rank.$r" ] || { cat "$T/batch/out" "$T/batch/err" >&2; fail "DDP rank $r wrote no result"; }
	expect_grep "DDP rank $r" "^rank $r/3 attempt 0 sum 6 want 6 replicas_equal True store True" "$T/ddp/rank.$r"
done
[ -d "$T/batch/logs/$bjob" ] || fail "no crun logs under logs/$bjob"
note "sbatch: job $bjob, DDP over 3 ranks (2 on h1, 1 on h2) completed"
exit 0
