#!/bin/sh
# A hung job explains itself: before crun SIGKILLs a worker that ignored the
# stop signal for --shutdown_timeout, it takes the worker's stack (py-spy on
# PATH or beside the interpreter, else faulthandler, else the kernel's wait
# channel), shows it on the console and saves it in failures.json's
# "stacks"; a worker in uninterruptible sleep (frozen by the cgroup v1
# freezer) is named and given up on, and the job exits or restarts anyway.
. tests/integration/lib.sh

HW=$TOP/tests/integration/py/hang_worker.py
LINE=$(grep -n 'HANG_LINE' "$HW" | cut -d: -f1)
SPY_DIR=$TOP/.venv/bin
NOSPY_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
for _d in $(echo "$NOSPY_PATH" | tr ':' ' '); do
	[ ! -x "$_d/py-spy" ] || skip "py-spy in $_d: the faulthandler part cannot run"
done

# run NAME WANT_STATUS PATH CRUN_ARGS...: crun with the hang worker, which
# rank 0 ends (exit 3) once rank 1's pid is known; out in $T/NAME.out, the
# round's failures.json in $T/NAME.json.
run_hang() {
	_hn=$1 _want=$2 _path=$3
	shift 3
	mkdir -p "$T/$_hn"
	PATH=$_path "$CRUN" --nproc_per_node=2 --shutdown_timeout=1 \
		--log_dir="$T/$_hn/logs" "$@" >"$T/$_hn.out" 2>&1 &
	_crun=$!
	wait_for 30 test -f "$T/$_hn/pid.1" || { cat "$T/$_hn.out" >&2; fail "$_hn: rank 1 did not start"; }
	[ -z "${BEFORE_GO:-}" ] || $BEFORE_GO "$(cat "$T/$_hn/pid.1")"
	touch "$T/$_hn/go"
	wait_pid "${BOUND:-20}" $_crun "$T/$_hn.out"
	_rc=$?
	expect_eq "$_hn: status" "$_rc" "$_want"
	cp "$(ls "$T/$_hn"/logs/*/attempt_0/failures.json | head -n 1)" "$T/$_hn.json" 2>/dev/null ||
		fail "$_hn: no failures.json"
}

# stacks_of FILE RANK: failures.json's "stacks" of RANK ("None" when none).
stacks_of() {
	"$PYTHON" -c 'import json, sys
d = json.load(open(sys.argv[1]))
print([f for f in d["failures"] if f["rank"] == int(sys.argv[2])][0]["stacks"])' "$1" "$2"
}

# 1. py-spy on PATH: its dump (function, file:line) on the console and in
# failures.json; the rank that failed first stays the root cause.
run_hang spy 3 "$SPY_DIR:$NOSPY_PATH" /usr/bin/python3 "$HW" "$T/spy"
expect_grep "py-spy stack on the console" "hang_here (hang_worker.py:$LINE)" "$T/spy.out"
expect_grep "said before the kill" "stack of rank 1 (pid [0-9]*) before SIGKILL, from py-spy" "$T/spy.out"
stacks_of "$T/spy.json" 1 >"$T/spy.stacks"
expect_grep "py-spy stack in failures.json" "hang_here (hang_worker.py:$LINE)" "$T/spy.stacks"
expect_eq "root cause" "$("$PYTHON" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["failures"][d["root_cause"]]["rank"])' "$T/spy.json")" 0
expect_eq "PYTHONFAULTHANDLER set for a Python worker" "$(cat "$T/spy/fh.0")" 1

# 2. No py-spy anywhere: faulthandler's dump, which the worker writes to its
# own stderr as it dies of SIGABRT (prefixed like its other lines).
run_hang fault 3 "$NOSPY_PATH" --tee=3 /usr/bin/python3 "$HW" "$T/fault"
expect_grep "faulthandler stack on the console" "^\[default1\]:  File \"$HW\", line $LINE in hang_here" "$T/fault.out"
stacks_of "$T/fault.json" 1 >"$T/fault.stacks"
expect_grep "faulthandler stack in failures.json" "File \"$HW\", line $LINE in hang_here" "$T/fault.stacks"
# Its SIGABRT was the kill's way to its stack: it died of that kill.
expect_grep "it counts as killed" "exitcode  : 137 (pid: [0-9]*, signal 9: SIGKILL)" "$T/fault.out"

# The user's own PYTHONFAULTHANDLER (even empty) stands.
(
	export PYTHONFAULTHANDLER=
	run_hang fault_off 3 "$NOSPY_PATH" /usr/bin/python3 "$HW" "$T/fault_off"
) || exit 1
expect_eq "the user's PYTHONFAULTHANDLER" "$(cat "$T/fault_off/fh.0")" ""
expect_grep "then the kernel's view" "pid [0-9]* (python3) is sleeping (state S)" "$T/fault_off.out"

# 3. The test venv's interpreter (PyTorch 2.13's), PATH without py-spy:
# py-spy is found beside the interpreter.
if [ -x "$SPY_DIR/python" ] && [ -x "$SPY_DIR/py-spy" ]; then
	run_hang venv 3 "$NOSPY_PATH" "$SPY_DIR/python" "$HW" "$T/venv"
	expect_grep "py-spy beside the interpreter" "hang_here (hang_worker.py:$LINE)" "$T/venv.out"
else
	echo "   SKIPPED: the venv interpreter part ($SPY_DIR/python or py-spy missing; make test-venv)"
fi

# 4. A worker that is no Python: its kernel wait channel.
cat >"$T/hang.sh" <<EOF
d=\$1
if [ "\$LOCAL_RANK" = 0 ]; then
	while [ ! -f "\$d/go" ]; do sleep 0.05; done
	exit 3
fi
trap "" TERM
echo \$\$ >"\$d/pid.tmp" && mv "\$d/pid.tmp" "\$d/pid.1"
exec "$FAKE_WORKER" hang
EOF
run_hang native 3 "$NOSPY_PATH" --no_python sh "$T/hang.sh" "$T/native"
expect_grep "wait channel on the console" "pid [0-9]* (fake_worker) is sleeping (state S), wchan \`" "$T/native.out"
stacks_of "$T/native.json" 1 >"$T/native.stacks"
expect_grep "wait channel in failures.json" "(fake_worker) is sleeping (state S), wchan" "$T/native.stacks"

# 5. A worker in uninterruptible sleep (the cgroup v1 freezer): SIGKILL
# cannot stop it; crun names it and ends the round without it, exiting or
# restarting within its bound.
FZ=/sys/fs/cgroup/freezer
if [ -f "$FZ/tasks" ]; then
	freeze() {
		_g=$FZ/crun_test_$$_$1
		mkdir "$_g" || fail "cannot make freezer cgroup $_g"
		at_exit "echo THAWED >$_g/freezer.state; sleep 0.2; echo $1 >$FZ/cgroup.procs; rmdir $_g"
		echo "$1" >"$_g/tasks"
		echo FROZEN >"$_g/freezer.state"
		wait_for 5 grep -q FROZEN "$_g/freezer.state" || fail "pid $1 did not freeze"
		wait_for 5 grep -q '^State:.D' "/proc/$1/status" || fail "pid $1 is not in state D"
	}
	t0=$(date +%s)
	BEFORE_GO=freeze BOUND=20 run_hang frozen 3 "$NOSPY_PATH" /usr/bin/python3 "$HW" "$T/frozen"
	s=$(( $(date +%s) - t0 ))
	P=$(cat "$T/frozen/pid.1")
	expect_grep "named" "rank 1 (pid $P) is in uninterruptible sleep in \`[^\`]*\`, it cannot be killed" "$T/frozen.out"
	grep -q '^State:.D' "/proc/$P/status" || fail "pid $P was not frozen to the end"
	# shutdown_timeout 1 s, its stack at once (/proc), 5 s after SIGKILL.
	[ "$s" -le 12 ] || fail "crun took $s s to give up on a frozen worker"
	stacks_of "$T/frozen.json" 1 >"$T/frozen.stacks"
	expect_grep "its stack in failures.json" "is in uninterruptible sleep (state D)" "$T/frozen.stacks"

	# With a restart left, the next round runs (and succeeds) without it,
	# on a workers' store of its own.
	BEFORE_GO=freeze BOUND=20 run_hang frozen_restart 0 "$NOSPY_PATH" --max_restarts=1 \
		/usr/bin/python3 "$HW" "$T/frozen_restart"
	expect_grep "restarted" "restarting the worker group (restart 1 of 1)" "$T/frozen_restart.out"
	expect_grep "a store of its own" "workers' store starts afresh on port" "$T/frozen_restart.out"
else
	echo "   SKIPPED: the uninterruptible-sleep part (no cgroup v1 freezer at $FZ)"
fi
