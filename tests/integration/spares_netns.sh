#!/bin/sh
# needs: torch
# Spares with real PyTorch across network-namespace hosts: a checkpointing
# gloo DDP job (py/ckpt_train.py: 60 steps of 0.1 s, a checkpoint every 5)
# under --nnodes=2, h1 hosting the rendezvous.
#  1. h1 and h2 form round 0; h3 comes later and waits as a spare. Mid-run,
#     every process of h2 is killed (kill -9: the host is lost). h1 and the
#     spare h3 form the next round, resume from the last checkpoint with the
#     same world size (2), and finish; h1 and h3 exit 0. Printed: the time
#     from the kill to the first training step after it.
#  2. The same job with no spare: h1 stops (1 node left of 2, no spare to
#     make it up) and exits 1 at once. Printed beside: the time from the kill
#     to h1's exit.
# Needs root.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh
netns_setup 3
export PYTHON
"$PYTHON" -c 'import torch.distributed' 2>/dev/null || skip "no PyTorch in $PYTHON"

now_ms() { date +%s%3N; }
agent_exited() { eval "exited \$pid_$1"; }
# agent HOST PORT DIR: one agent of job $JOB on HOST.
agent() {
	netns_spawn "$1" "$T/$JOB.$1.out" "$CRUN" --nnodes=2 --nproc_per_node=1 --max_restarts=3 \
		--rdzv_backend=c10d --rdzv_endpoint="h1:$2" --rdzv_id="$JOB" \
		--rdzv_conf=last_call_timeout=1,join_timeout=20 \
		tests/integration/py/ckpt_train.py --dir "$3"
	eval "pid_$1=\$NETNS_PID"
}
expect_status() { # HOST STATUS
	wait_for 90 agent_exited "$1" || { tail -n 20 "$T/$JOB.$1.out" >&2; fail "$JOB: $1 still running"; }
	eval "wait \$pid_$1"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$JOB".h?.out >&2; fail "$JOB: $1 exited $_rc, want $2"; }
}
steps_at_least() { [ -f "$1/steps" ] && [ "$(wc -l <"$1/steps")" -ge "$2" ]; }
# start PORT DIR HOSTS...: the first two form round 0, a third waits.
start() {
	_p=$1 _d=$2; shift 2
	mkdir -p "$_d"
	agent h1 "$_p" "$_d"
	wait_for 10 sh -c "ip netns exec $(netns_ns h1) ss -Hltn 'sport = :$_p' | grep -q ." ||
		{ cat "$T/$JOB.h1.out" >&2; fail "$JOB: h1 never served the store"; }
	agent h2 "$_p" "$_d"
	wait_for 60 grep -q "round 0: group rank" "$T/$JOB.h2.out" ||
		{ cat "$T/$JOB".h?.out >&2; fail "$JOB: round 0 never formed"; }
	if [ "$#" -gt 0 ]; then
		agent h3 "$_p" "$_d"
		wait_for 20 grep -q "waits as a spare" "$T/$JOB.h3.out" ||
			{ cat "$T/$JOB".h?.out >&2; fail "$JOB: h3 did not wait as a spare"; }
	fi
	# Twelve steps on both ranks (two checkpoints), then h2 is lost.
	wait_for 90 steps_at_least "$_d" 24 || { cat "$T/$JOB".h?.out >&2; fail "$JOB: training did not start"; }
	t_kill=$(now_ms)
	netns_kill h2
}

JOB=spnet D=$T/spnet
start 29441 "$D" h3
expect_status h1 0
expect_status h3 0
after=$(awk -v t="$t_kill" '$2 != 0 && $6 > t { print $6 - t; exit }' "$D/steps")
[ -n "$after" ] || { cat "$T/$JOB".h?.out >&2; fail "$JOB: no training step after the kill"; }
expect_grep "$JOB: h1 re-formed with the spare" "re-forming the group .*; no restart is spent\|re-forming the group: restart" "$T/$JOB.h1.out"
expect_grep "$JOB: h3 joined the job" "round [1-9]: group rank [01] of 2" "$T/$JOB.h3.out"
expect_eq "$JOB: world size 2 in every step" "$(awk '{ print $4 }' "$D/steps" | sort -u)" 2
expect_grep "$JOB: h3 trained" "^h3 [1-9]" "$D/steps"
expect_eq "$JOB: rank 0 reached the last step" "$(awk '$3 == 0 { s = $5 } END { print s }' "$D/steps")" 59
last0=$(awk '$2 == 0 && $3 == 0 { s = $5 } END { print s }' "$D/steps")
first1=$(awk '$2 != 0 && $3 == 0 { print $5; exit }' "$D/steps")
[ $((first1 % 5)) = 1 ] && [ "$first1" -le $((last0 + 1)) ] && [ "$first1" -gt $((last0 - 5)) ] ||
	fail "$JOB: resumed at step $first1 after step $last0: not the step after the last checkpoint"
note "1. h2 lost at step $last0; the spare h3 took its place: training resumed from the checkpoint (step $first1), world size 2, $after ms after the kill"

cat $T/spnet.h1.out $T/spnet.h3.out >&2; netns_kill_all
JOB=nospare D=$T/nospare
start 29442 "$D"
expect_status h1 1
gone=$(( $(now_ms) - t_kill ))
expect_grep "$JOB: h1 says why" "below the minimum of 2, and no spare waits to make it up\|job failed\|timed out" "$T/$JOB.h1.out"
note "2. no spare: h1 stopped and exited 1, $gone ms after the kill (with a spare: training again after $after ms)"
exit 0
