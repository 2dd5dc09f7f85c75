#!/bin/sh
# The agent under faults: every case ends in bounded time with the
# right status and leaves no process behind. Each check names its defect.
. tests/integration/lib.sh

FAST="--rdzv_conf=last_call_timeout=1,join_timeout=20"
M=$$ # a marker in sleep arguments, so only our processes are counted

# count PATTERN: live processes whose command line matches (zombies excluded).
count() { pgrep -f "$1" 2>/dev/null | wc -l; }
none() { [ "$(count "$1")" -eq 0 ]; }
# run_bounded SECONDS OUT crun-args...: crun in the foreground, status in $rc.
run_bounded() {
	_s=$1 _o=$2; shift 2
	timeout -s KILL "$_s" "$CRUN" "$@" >"$_o" 2>&1; rc=$?
	[ $rc -ne 137 ] || { tail -n 20 "$_o" >&2; fail "crun still running after $_s s: $*"; }
}
# FAULTS="1 2" runs only those sections (to show each fails on an old build).
want() { [ -z "${FAULTS:-}" ] && return 0; case " $FAULTS " in *" $1 "*) return 0;; esac; return 1; }
at_exit "pkill -KILL -f 'sleep 9[0-9]*$M' "

printf '#!/nonexistent/interpreter\necho never\n' >"$T/bad.sh"
chmod +x "$T/bad.sh"

if want 1; then
# 1. A worker that cannot start (bad interpreter) fails the round like a worker
# failure: restarts are spent, then crun exits 127 in bounded time, alone ...
PORT=$(free_port)
run_bounded 30 "$T/1a.out" --nnodes=1:2 --rdzv_backend=c10d \
	--rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=f1 $FAST --max_restarts=1 "$T/bad.sh"
expect_eq "1: status of a worker that cannot start (1 node of 1:2)" $rc 127
expect_grep "1: the restart is spent" "restart 1 of 1 after a worker failure" "$T/1a.out"
run_bounded 30 "$T/1s.out" --standalone --max_restarts=1 "$T/bad.sh"
expect_eq "1: status of a worker that cannot start (standalone)" $rc 127
# The message names what is missing: the interpreter, not the script.
expect_grep "1: the missing interpreter is named" "cannot execute '$T/bad.sh': its interpreter '/nonexistent/interpreter' does not exist" "$T/1s.out"

# ... and on two nodes: the store host cannot start its worker; the other
# node's worker (which would hang) is stopped and both exit 127.
PORT=$(free_port)
"$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_id=f1b $FAST "$T/bad.sh" >"$T/1h.out" 2>&1 &
host=$!
wait_for 10 listening $PORT || fail "1: the host never served the store"
run_bounded 40 "$T/1o.out" --nnodes=2 --rdzv_backend=c10d \
	--rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=f1b $FAST "$FAKE_WORKER" hang
expect_eq "1: the other node's status" $rc 127
wait_for 20 sh -c "! kill -0 $host 2>/dev/null" || fail "1: the store host still runs"
wait $host; expect_eq "1: the store host's status" $? 127

# ... and a node whose log directory cannot be made is one whose workers
# cannot start: the round ends on both nodes, with 127.
PORT=$(free_port)
"$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_id=f1c $FAST "$FAKE_WORKER" hang >"$T/1c.out" 2>&1 &
host=$!
wait_for 10 listening $PORT || fail "1: the host never served the store"
run_bounded 40 "$T/1d.out" --nnodes=2 --rdzv_backend=c10d --log_dir=/dev/null/x \
	--rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=f1c $FAST "$FAKE_WORKER" hang
expect_eq "1: status of the node without a log directory" $rc 127
expect_grep "1: it says why" "cannot create log directory '/dev/null/x'" "$T/1d.out"
wait_for 20 sh -c "! kill -0 $host 2>/dev/null" || fail "1: the store host still runs"
wait $host; expect_eq "1: the other node's status" $? 127

fi

if want 2; then
# 2. A worker's process group is killed after it exits, failed or not, so
# nothing of it survives crun.
run_bounded 60 "$T/2.out" --standalone --max_restarts=2 /bin/sh -c "sleep 9871$M & exit 1"
expect_eq "2: status" $rc 1
wait_for 5 none "sleep 9871$M" || fail "2: $(count "sleep 9871$M") 'sleep 9871$M' outlived crun"
run_bounded 60 "$T/2b.out" --standalone --shutdown_timeout=2 /bin/sh -c \
	"trap '' TERM; (trap '' TERM; exec sleep 9872$M) & exit 0"
expect_eq "2: status of a worker that left a child ignoring SIGTERM" $rc 0
wait_for 5 none "sleep 9872$M" || fail "2: a child ignoring SIGTERM outlived crun"

fi

if want 3; then
# 3. A stalled console reader never blocks the agent: the per-rank log stays
# complete, and SIGTERM is acted on while the reader sleeps.
mkfifo "$T/fifo"
sleep 60 <"$T/fifo" &
stall=$!
at_exit "kill $stall"
"$CRUN" --standalone --log_dir="$T/l3" --tee=3 "$FAKE_WORKER" print 50000 hang \
	>"$T/fifo" 2>"$T/3.err" &
crun=$!
log_lines() { [ "$(cat "$T"/l3/*/attempt_0/0/stdout.log 2>/dev/null | wc -l)" -ge 50000 ]; }
wait_for 20 log_lines || fail "3: stdout.log incomplete while the console reader stalls"
kill -TERM $crun
wait_for 10 sh -c "! kill -0 $crun 2>/dev/null" || fail "3: SIGTERM not acted on while the console reader stalls"
wait $crun; expect_eq "3: status after SIGTERM" $? 143
kill $stall 2>/dev/null

# On two nodes, the node with the stalled reader keeps its heartbeats: the
# other does not declare it dead, and it still acts on SIGTERM.
PORT=$(free_port)
mkfifo "$T/fifo2"
sleep 60 <"$T/fifo2" &
stall2=$!
at_exit "kill $stall2"
"$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=f3 \
	$FAST "$FAKE_WORKER" pid "$T/3.pids" hang >"$T/3a.out" 2>&1 &
a=$!
wait_for 10 listening $PORT || fail "3: the host never served the store"
"$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=f3 \
	$FAST "$FAKE_WORKER" pid "$T/3.pids" print 50000 hang >"$T/fifo2" 2>"$T/3b.err" &
b=$!
wait_for 20 sh -c "[ \$(cat '$T/3.pids' 2>/dev/null | wc -l) -ge 2 ]" || fail "3: the two nodes never ran"
sleep 4 # four heartbeat windows (1.5 s): a stalled loop would be declared dead
kill -0 $a 2>/dev/null || { cat "$T/3a.out" >&2; fail "3: the host ended while the other node's console stalled"; }
expect_nogrep "3: no false death" "stopped answering\|disconnected\|round 0 ended" "$T/3a.out"
kill -TERM $b
wait_for 10 sh -c "! kill -0 $b 2>/dev/null" || fail "3: SIGTERM not acted on by a node whose console stalls"
wait $b; expect_eq "3: status of the signalled node" $? 143
wait_for 20 sh -c "! kill -0 $a 2>/dev/null" || { cat "$T/3a.out" "$T/3b.err" >&2; fail "3: the host still runs"; }
wait $a
kill $stall2 2>/dev/null

# Lines reach a slow reader whole and in order, with several workers; past
# the console bound (4 MiB) lines are dropped whole, and a notice counts them.
"$CRUN" --standalone --nproc_per_node=3 "$FAKE_WORKER" print 30000 2>"$T/3b.err" |
	{ sleep 3; cat; } >"$T/3.out"
good=$(grep -c '^rank [0-2] line [0-9]* abcdefghijklmnopqrstuvwxyz0123456789 end$' "$T/3.out")
dropped=$(sed -n 's/^crun: dropped \([0-9]*\) lines (.*/\1/p' "$T/3.out" | awk '{ s += $1 } END { print s + 0 }')
[ "$dropped" -gt 0 ] || fail "3: no drop notice although 5 MB waited for a stalled reader"
expect_eq "3: lines shown + lines counted as dropped" $((good + dropped)) 90000
expect_eq "3: no line split or mixed" "$(grep -v -c -e '^rank [0-2] line [0-9]* abcdefghijklmnopqrstuvwxyz0123456789 end$' -e '^crun: ' "$T/3.out")" 0
for r in 0 1 2; do
	grep "^rank $r " "$T/3.out" | awk -v r=$r '$4 <= last && NR > 1 { print "3: rank " r " out of order: " $0; exit 1 } { last = $4 }' >&2 ||
		fail "3: rank $r lines out of order"
done
fi

if want 4; then
# 4. The drain at exit is bounded: a grandchild that keeps writing cannot keep
# the agent in it.
run_bounded 30 "$T/4.out" --standalone /bin/sh -c 'yes & sleep 0.2; exit 0'
expect_eq "4: status with 'yes &' left behind" $rc 0

fi

if want 5; then
# 5. A silent program holding the endpoint port (listens, never answers):
# both agents give up within join_timeout and name it; no progress line
# counts past the timeout.
for addr in 0.0.0.0 127.0.0.1; do
	PORT=$(free_port)
	"$PYTHON" -c "
import socket, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('$addr', $PORT)); s.listen(); time.sleep(40)" &
stranger=$!
	at_exit "kill $stranger"
	wait_for 20 listening $PORT || fail "5: the stranger never listened"
	for n in 1 2; do
		timeout -s KILL 20 "$CRUN" --nnodes=2 --rdzv_backend=c10d \
			--rdzv_endpoint=127.0.0.1:$PORT --rdzv_conf=join_timeout=6 \
			/bin/true >"$T/5.$n.out" 2>&1 &
		eval "p$n=\$!"
	done
	wait $p1; rc1=$?; wait $p2; rc2=$?
	for n in 1 2; do
		eval "rc=\$rc$n"
		[ $rc -ne 137 ] || { cat "$T/5.$n.out" >&2; fail "5: agent $n still waiting 20 s after a 6 s join timeout (stranger on $addr)"; }
		expect_eq "5: agent $n status (stranger on $addr)" $rc 1
		expect_grep "5: agent $n names the holder (stranger on $addr)" "held by another program.*pid $stranger (python3)" "$T/5.$n.out"
		! grep -E 'waiting for rendezvous host.* ([0-9]+) s of ([0-9]+) s' "$T/5.$n.out" |
			awk '{ for (i = 1; i < NF; i++) if ($(i+1) == "s" && $(i+2) == "of") { a = $i; b = $(i+3) } } a + 0 > b + 0 { bad = 1 } END { exit !bad }' ||
			fail "5: a progress line counts past the timeout"
	done
	kill $stranger; wait $stranger 2>/dev/null
done
fi

if want 6; then
# 6. The agent's fds are budgeted: under RLIMIT_NOFILE=64, 100 idle
# connections to the rendezvous port leave the next round the fds its
# workers need, and the job finishes.
command -v prlimit >/dev/null || skip "6: no prlimit"
PORT=$(free_port)
timeout -s KILL 60 prlimit --nofile=64 "$CRUN" --nnodes=1:2 --nproc_per_node=2 \
	--log_dir="$T/l6" --tee=3 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT \
	--rdzv_id=f6 $FAST --max_restarts=1 "$FAKE_WORKER" pid "$T/6.pids" sleep 2000 \
	fail-if-attempt 0 1 >"$T/6.out" 2>&1 &
crun=$!
wait_for 20 test -s "$T/6.pids" || fail "6: round 0 never started"
"$PYTHON" -c "
import socket, sys, time
conns = [socket.create_connection(('127.0.0.1', $PORT)) for i in range(100)]
time.sleep(15)" &
idle=$!
at_exit "kill $idle"
wait $crun; rc=$?
[ $rc -ne 137 ] || { cat "$T/6.out" >&2; fail "6: crun hung with 100 idle connections"; }
[ $rc -eq 0 ] || { cat "$T/6.out" >&2; fail "6: status $rc with 100 idle connections, want 0"; }
expect_grep "6: round 1 ran" "2 workers of .* succeeded (ranks 0-1 of 2, generation 1" "$T/6.out"
kill $idle 2>/dev/null
fi

if want 7; then
# 7. Numbers out of range are usage errors (exit 2, one line naming them);
# job files over 1 MiB and non-regular files are refused, naming the file.
# A memory bound (an old build reads /dev/zero without one), except under
# AddressSanitizer, which reserves terabytes of address space.
vlimit=$(vmem_limit 2000000)
usage_err() { # WHAT PATTERN crun-args...
	_w=$1 _p=$2; shift 2
	(ulimit -v $vlimit; timeout -s KILL 10 "$CRUN" "$@") >"$T/7.out" 2>&1; _rc=$?
	expect_eq "7: status of $_w" $_rc 2
	expect_eq "7: one line for $_w" "$(wc -l <"$T/7.out")" 1
	expect_grep "7: message for $_w" "$_p" "$T/7.out"
}
PORT=$(free_port)
for conf in join_timeout=1e300 last_call_timeout=1e300 close_timeout=1e300 \
	keep_alive_interval=1e300 read_timeout=1e300 timeout=1e300; do
	usage_err "$conf" "out of range" --nnodes=2 --rdzv_backend=c10d \
		--rdzv_endpoint=127.0.0.1:$PORT --rdzv_conf=$conf /bin/true
done
usage_err shutdown_timeout "shutdown_timeout.*out of range" --shutdown_timeout=1e300 /bin/true
usage_err monitor_interval "monitor_interval.*out of range" --monitor_interval=1e300 /bin/true
usage_err store_max_conns "store_max_conns.*out of range" --store_max_conns=1G /bin/true
usage_err console_buffer "console_buffer.*out of range" --console_buffer=2G /bin/true
usage_err "/dev/zero" "/dev/zero: job file is not a regular file" --config /dev/zero /bin/true
head -c 1100000 /dev/zero | tr '\0' '#' >"$T/big.ini"
usage_err "a 1.1 MB job file" "big.ini: job file larger than" --config "$T/big.ini" /bin/true
fi

if want 8; then
# 8. SIGTERM to one node of an elastic job (spot reclaim) is a node loss while
# MIN holds: the others re-form without spending a restart and finish ...
PORT=$(free_port)
node() { # NAME: a node of --nnodes=2:3 whose workers hang in round 0
	"$CRUN" --nnodes=2:3 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:$PORT \
		--rdzv_id=f8 $FAST --max_restarts=0 "$FAKE_WORKER" pid "$T/8.$1.pids" \
		hang-if-attempt 0 >"$T/8.$1.out" 2>&1 &
	eval "pid_$1=\$!"
}
node a
wait_for 10 listening $PORT || fail "8: node a never served the store"
node b; node c
started() { [ -s "$T/8.a.pids" ] && [ -s "$T/8.b.pids" ] && [ -s "$T/8.c.pids" ]; }
wait_for 30 started || fail "8: the three nodes never ran round 0"
kill -TERM $pid_c
for n in a b c; do
	eval "p=\$pid_$n"
	wait_for 30 sh -c "! kill -0 $p 2>/dev/null" || fail "8: node $n still runs"
done
wait $pid_c; expect_eq "8: the signalled node's status" $? 143
wait $pid_a; rc_a=$?; wait $pid_b; rc_b=$?
[ $rc_a = 0 ] && [ $rc_b = 0 ] || { cat "$T/8.a.out" >&2; fail "8: survivors exited $rc_a, $rc_b; want 0, 0"; }
expect_grep "8: re-formed without a restart" "re-forming the group (.* left (SIGTERM)); no restart is spent" "$T/8.a.out"

# ... and ends the job, saying why, when MIN no longer holds.
PORT=$(free_port)
rm -f "$T"/8.*.pids
node a
wait_for 10 listening $PORT || fail "8: node a never served the store"
node b
wait_for 30 sh -c "[ -s '$T/8.a.pids' ] && [ -s '$T/8.b.pids' ]" || fail "8: two nodes never ran"
kill -TERM $pid_b
wait_for 15 sh -c "! kill -0 $pid_a 2>/dev/null" || fail "8: node a still runs below MIN"
wait $pid_b; expect_eq "8: the signalled node's status" $? 143
wait $pid_a; expect_eq "8: status below MIN" $? 143
expect_grep "8: the message says why" "1 node remains, below the minimum of 2" "$T/8.a.out"

# ... and every node signalled at once (scancel) stops everywhere with 143.
PORT=$(free_port)
rm -f "$T"/8.*.pids
node a
wait_for 10 listening $PORT || fail "8: node a never served the store"
node b; node c
wait_for 30 started || fail "8: the three nodes never ran round 0"
kill -TERM $pid_a $pid_b $pid_c
for n in a b c; do
	eval "p=\$pid_$n"
	wait_for 30 sh -c "! kill -0 $p 2>/dev/null" || fail "8: node $n still runs after scancel"
	wait $p; expect_eq "8: node $n status after all were signalled" $? 143
done
fi

if want gc; then
# Grandchildren die with a SIGKILLed agent, even one that called setsid.
cat >"$T/gc.sh" <<EOS
#!/bin/sh
sh -c 'sleep 9873$M & wait' &
setsid sleep 9874$M &
exec sleep 9875$M
EOS
chmod +x "$T/gc.sh"
"$CRUN" --standalone --nproc_per_node=2 "$T/gc.sh" >"$T/gc.out" 2>&1 &
crun=$!
wait_for 10 sh -c "[ \$(pgrep -f 'sleep 987[345]$M' | wc -l) -ge 6 ]" || fail "gc: workers did not start"
kill -KILL $crun
wait_for 5 none "sleep 987[345]$M" || fail "gc: $(count "sleep 987[345]$M") descendants outlived the SIGKILLed agent"
fi
exit 0
