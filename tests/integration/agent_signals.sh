#!/bin/sh
# Signals: forwarding to every worker's process group, escalation, the
# shutdown timeout, and no orphans when the agent itself is SIGKILLed.
. tests/integration/lib.sh

# Is any pid listed in file $1 still running (and not a zombie)?
alive() {
	for p in $(cat "$1"); do
		st=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' /proc/$p/status 2>/dev/null)
		[ -n "$st" ] && [ "$st" != Z ] && return 0
	done
	return 1
}
lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }

# SIGTERM to crun reaches every worker; crun exits 128+15.
"$CRUN" --nproc_per_node=3 "$FAKE_WORKER" trap "$T/sigs" pid "$T/pids" hang >"$T/out" 2>&1 &
crun=$!
wait_for 10 lines "$T/pids" 3 || fail "workers did not start"
kill -TERM $crun
wait_pid 10 $crun
expect_eq "status after SIGTERM" "$?" 143
expect_eq "every worker got SIGTERM" "$(sort "$T/sigs" | tr '\n' ' ')" "SIGTERM 0 SIGTERM 1 SIGTERM 2 "
expect_grep "notice" "received SIGTERM: forwarding it to the workers" "$T/out"

# A signal from --signals_to_handle (SIGUSR1, as SLURM sends) is forwarded too.
"$CRUN" --nproc_per_node=2 --signals_to_handle=SIGTERM,SIGUSR1 \
	"$FAKE_WORKER" trap "$T/sigs2" pid "$T/pids2" hang >"$T/out2" 2>&1 &
crun=$!
wait_for 10 lines "$T/pids2" 2 || fail "workers did not start"
kill -USR1 $crun
wait_pid 10 $crun
expect_eq "status after SIGUSR1" "$?" 138
expect_eq "every worker got SIGUSR1" "$(sort "$T/sigs2" | tr '\n' ' ')" "SIGUSR1 0 SIGUSR1 1 "

# Workers that ignore SIGTERM are killed after --shutdown_timeout.
"$CRUN" --nproc_per_node=2 --shutdown_timeout=1 \
	"$FAKE_WORKER" ignore TERM pid "$T/pids3" hang >"$T/out3" 2>&1 &
crun=$!
wait_for 10 lines "$T/pids3" 2 || fail "workers did not start"
t0=$(date +%s%3N)
kill -TERM $crun
wait_pid 10 $crun
rc=$?
ms=$(( $(date +%s%3N) - t0 ))
expect_eq "status after timeout" "$rc" 143
# The timeout is waited out (not skipped), and not overrun: 1 s, +1 s of slack.
[ "$ms" -ge 950 ] && [ "$ms" -le 2000 ] || fail "--shutdown_timeout=1 took $ms ms, want 1000-2000 ms"
expect_grep "escalation" "sending SIGKILL" "$T/out3"
! alive "$T/pids3" || fail "workers survived"

# A second SIGINT escalates to SIGKILL at once.
"$CRUN" --nproc_per_node=2 --shutdown_timeout=600 \
	"$FAKE_WORKER" ignore INT pid "$T/pids4" hang >"$T/out4" 2>&1 &
crun=$!
wait_for 10 lines "$T/pids4" 2 || fail "workers did not start"
kill -INT $crun
wait_for 10 grep -q "received SIGINT" "$T/out4" || fail "first SIGINT not seen"
alive "$T/pids4" || fail "workers should have ignored the first SIGINT"
kill -INT $crun
wait_pid 10 $crun
expect_eq "status after two SIGINTs" "$?" 130
expect_grep "escalation" "second SIGINT" "$T/out4"

# SIGKILL to crun: the parent-death signal takes every worker within 1 s.
"$CRUN" --nproc_per_node=3 "$FAKE_WORKER" ignore TERM pid "$T/pids5" hang >/dev/null 2>&1 &
crun=$!
wait_for 10 lines "$T/pids5" 3 || fail "workers did not start"
kill -KILL $crun
wait_pid 5 $crun 2>/dev/null
none_alive() { ! alive "$1"; }
wait_for 1 none_alive "$T/pids5" ||
	fail "workers outlived a SIGKILLed agent: $(cat "$T/pids5")"

# A signal while stopping: the workers ignore the SIGTERM, and a SIGUSR1
# that comes while crun waits for them (shutdown timeout 60 s) is forwarded
# too; crun still exits with the first signal's status.
"$CRUN" --nproc_per_node=2 --shutdown_timeout=60 --signals_to_handle=SIGTERM,SIGUSR1 \
	"$FAKE_WORKER" trap "$T/sigs6" ignore TERM pid "$T/pids6" hang >"$T/out6" 2>&1 &
crun=$!
wait_for 10 lines "$T/pids6" 2 || fail "workers did not start"
kill -TERM $crun
wait_for 10 grep -q "received SIGTERM" "$T/out6" || fail "SIGTERM not seen"
kill -USR1 $crun
wait_pid 10 $crun "$T/out6"
expect_eq "status after SIGTERM then SIGUSR1" "$?" 143
expect_eq "SIGUSR1 reached the stopping workers" "$(sort "$T/sigs6" | tr '\n' ' ')" "SIGUSR1 0 SIGUSR1 1 "
exit 0
