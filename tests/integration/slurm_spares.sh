#!/bin/sh
# A real 3-node SLURM cluster (lib_slurm.sh's slurm_start_multi: hosts h1-h3
# in network namespaces, one slurmd each), one crun per node by srun -N3.
#  1. The first round waits for the allocation: crun --nnodes=2:3 with
#     last_call_timeout=1 and h3's crun starting 4 s late: round 0 has all
#     three nodes (not two, then a re-forming for the third), and the node
#     that made MIN says it waits for the step's missing node.
#  2. Spares under SLURM: crun --nnodes=2 on 3 nodes: one node waits as a
#     spare; the job succeeds and srun exits 0 (the spare does not fail the
#     step: it exits 0, not needed).
#  3. The same job whose workers all exit 3 (no restart): srun exits 3, and
#     the spare exits 3 too, saying the job stopped.
# Needs root (namespaces, daemons).
. tests/integration/lib.sh
. tests/integration/lib_netns.sh
. tests/integration/lib_slurm.sh

slurm_need
[ -x "$CRUN" ] || skip "no crun binary at $CRUN (make first)"
[ -x "$FAKE_WORKER" ] || skip "no fake worker at $FAKE_WORKER (make first)"
slurm_start_multi 3

# The step's task: node 2 starts $LATE seconds late, then crun.
printf '#!/bin/sh\n[ "$SLURM_NODEID" = 2 ] && [ -n "$LATE" ] && sleep "$LATE"\nexec "%s" "$@"\n' \
	"$CRUN" >"$T/task"
chmod +x "$T/task"

# step NAME PORT LATE CRUN-ARGS...: srun -N3, each node's output in
# $T/NAME.<node id>; sets rc.
step() {
	_n=$1 _p=$2 _l=$3; shift 3
	slurm_client env LATE="$_l" srun -N3 --ntasks-per-node=1 --job-name="$_n" \
		--output="$T/$_n.%n" "$T/task" --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint="h1:$_p" --rdzv_id="$_n" "$@" >"$T/$_n.srun" 2>&1
	rc=$?
}
show() { for _f in "$T/$1".*; do echo "--- $_f" >&2; cat "$_f" >&2; done; }
# count NAME PATTERN: how many nodes' outputs have PATTERN.
count() { grep -l -e "$2" "$T/$1".[0-9] 2>/dev/null | wc -l; }

step alloc 29531 4 --nnodes=2:3 --rdzv_conf=last_call_timeout=1,join_timeout=30 \
	--no_python "$FAKE_WORKER" sleep 300 exit 0
[ $rc -eq 0 ] || { show alloc; slurm_fail "alloc: srun exited $rc"; }
[ "$(count alloc "round 0: group rank [0-2] of 3")" = 3 ] ||
	{ show alloc; fail "alloc: round 0 did not have the 3 nodes of the step"; }
[ "$(count alloc "re-form")" = 0 ] || { show alloc; fail "alloc: the job re-formed for a late node"; }
[ "$(count alloc "2 of the 3 nodes of the allocation (SLURM_STEP_NUM_NODES=3) have joined: waiting up to 30 s")" = 1 ] ||
	{ show alloc; fail "alloc: no node said it waits for the step's missing node"; }
note "1. --nnodes=2:3, h3 4 s late, last_call_timeout=1: round 0 waited for it (3 nodes)"

step spok 29532 "" --nnodes=2 --rdzv_conf=last_call_timeout=1,join_timeout=30 \
	--no_python "$FAKE_WORKER" sleep 3000 exit 0
[ $rc -eq 0 ] || { show spok; slurm_fail "spok: srun exited $rc, want 0"; }
[ "$(count spok "waits as a spare")" = 1 ] || { show spok; fail "spok: not one spare"; }
[ "$(count spok "job finished; this spare (h[1-3]) was not needed; exiting with status 0")" = 1 ] ||
	{ show spok; fail "spok: the spare did not exit 0 as not needed"; }
note "2. --nnodes=2 on 3 nodes: the job succeeded, the spare exited 0, srun 0"

step spfail 29533 "" --nnodes=2 --max_restarts=0 --rdzv_conf=last_call_timeout=1,join_timeout=30 \
	--no_python "$FAKE_WORKER" sleep 3000 exit 3
[ $rc -eq 3 ] || { show spfail; slurm_fail "spfail: srun exited $rc, want 3"; }
[ "$(count spfail "job stopped (3 .*) while h[1-3] waited as a spare.*exiting with status 3")" = 1 ] ||
	{ show spfail; fail "spfail: the spare did not exit with the job's status 3"; }
note "3. the job's workers exited 3: the spare exited 3 too, srun 3"
exit 0
