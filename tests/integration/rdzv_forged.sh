#!/bin/sh
# Forged rendezvous records: a store pre-seeded with malformed keys (as anyone
# who reaches the rendezvous port can write them) makes the agent stop with
# one message naming the key, never a crash. The first case is a group world
# size of 0, which would otherwise be a SIGFPE (a modulo by it).
. tests/integration/lib.sh
RAW="$PYTHON $TOP/tests/integration/py/raw_store.py"

"$CRUN" store --port 0 --host 127.0.0.1 2>"$T/store.err" &
spid=$!
at_exit "kill $spid"
wait_for 10 grep -q 'listening on' "$T/store.err" || fail "crun store never listened"
PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$T/store.err" | head -n 1)
[ -n "$PORT" ] || fail "no port in: $(cat "$T/store.err")"

# forged JOB EXPECTED-MESSAGE KEY=VALUE...: seed the keys, run one agent,
# expect a clean exit 1 and the message on stderr.
forged() {
	job=$1 want=$2; shift 2
	args="set crun/job $job"
	for kv in "$@"; do
		args="$args set crun/$job/${kv%%=*} \"${kv#*=}\""
	done
	eval "$RAW 127.0.0.1 $PORT $args" >/dev/null || fail "$job: cannot seed the store"
	timeout 30 "$CRUN" --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id="$job" \
		--rdzv_conf=join_timeout=10 /bin/true >"$T/$job.out" 2>&1
	rc=$?
	[ $rc -lt 128 ] || { cat "$T/$job.out" >&2; fail "$job: agent died of signal $((rc - 128))"; }
	[ $rc -ne 124 ] || { cat "$T/$job.out" >&2; fail "$job: agent hung"; }
	expect_eq "$job: exit status" $rc 1
	expect_grep "$job: message" "$want" "$T/$job.out"
}

# 1. An assignment with a group world size of 0 (a modulo by it: SIGFPE).
forged fpe "malformed rendezvous record 'crun/fpe/r0/assign/1'.*group world size '0'" \
	r0/assigned=ok r0/closed=1 r0/addrs=127.0.0.1 r0/envcheck=- "r0/assign/1=0 0 0 0 0 0 0"
# 2. A group rank outside the world.
forged grank "malformed rendezvous record 'crun/grank/r0/assign/1'.*group rank '5'" \
	r0/assigned=ok r0/closed=1 r0/addrs=127.0.0.1 r0/envcheck=- "r0/assign/1=5 1 0 1 0 1 1"
# 3. Ranks beyond the world size (RANK >= WORLD_SIZE).
forged world "'crun/world/r0/assign/1'.*outside a world of 1" \
	r0/assigned=ok r0/closed=1 r0/addrs=127.0.0.1 r0/envcheck=- "r0/assign/1=0 1 3 1 0 1 1"
# 4. A closed count above --nnodes.
forged closed "malformed rendezvous record 'crun/closed/r0/closed'" \
	r0/assigned=ok r0/closed=100000
# 4b. An "ok N" whose N is above --nnodes.
forged oknum "malformed rendezvous record 'crun/oknum/r0/assigned'.*not a number in 1..2" \
	"r0/assigned=ok 100000"
# 5. An assignment that is not numbers at all.
forged junk "malformed rendezvous record 'crun/junk/r0/assign/1'.*is not a number" \
	r0/assigned=ok r0/closed=1 r0/addrs=127.0.0.1 r0/envcheck=- "r0/assign/1=zero one"
# 6. A round number that is not a number.
forged round "malformed rendezvous record 'crun/round/round'" "round=-7"
# 7. An "assigned" record that is neither ok nor an abort.
forged assigned "malformed rendezvous record 'crun/assigned/r0/assigned'" \
	r0/assigned=maybe r0/closed=1
# 8. A master record with port 0 (the agent is made group rank 1 of 2, so it
# reads the master record rather than writing its own).
forged master "malformed rendezvous record 'crun/master/r0/master'.*port" \
	r0/assigned=ok r0/closed=2 "r0/addrs=127.0.0.1 127.0.0.1" r0/envcheck=- "r0/assign/1=1 2 1 2 1 2 1" "r0/master=10.0.0.1 0"
# 9. An addresses record with fewer addresses than nodes (read by group
# rank 0 alone, for its workers' store's allow list: the agent is made it).
forged addrs "malformed rendezvous record 'crun/addrs/r0/addrs'" \
	r0/assigned=ok r0/closed=2 r0/addrs=127.0.0.1 r0/envcheck=- "r0/assign/1=0 2 0 2 0 2 1"
# 10. A descriptor with nproc 0, read by the agent that closes the round.
# "evil" took arrival index 1; the agent arrives second and closes.
forged descr "malformed rendezvous record 'crun/descr/r0/node/1' written by evil.*nproc" \
	r0/join=1 "r0/node/1=0 0 0 1 evil 10.0.0.9 default" r0/expect=2

# forged_running JOB END MARK KEY: while a round runs, forge its "end" record
# and node 0's end/0 mark (which carries the end, or "1": read "end"); the
# job stops at once with KEY named.
forged_running() {
	job=$1
	$RAW 127.0.0.1 $PORT set crun/job "$job" >/dev/null || fail "$job: cannot reset crun/job"
	timeout 60 "$CRUN" --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id="$job" \
		--rdzv_conf=last_call_timeout=1 /bin/sh -c 'touch "$0"; sleep 30' "$T/$job.started" >"$T/$job.out" 2>&1 &
	rpid=$!; t0=$(date +%s)
	wait_for 20 test -e "$T/$job.started" || { cat "$T/$job.out" >&2; fail "$job: the worker never started"; }
	$RAW 127.0.0.1 $PORT set "crun/$job/r0/end" "$2" set "crun/$job/r0/end/0" "$3" >/dev/null ||
		fail "$job: cannot forge the end record"
	wait $rpid; rc=$?; el=$(( $(date +%s) - t0 ))
	note "$job: stopped $el s after the worker started"
	# A fatal end never restarts: no wait for a restart count nobody writes.
	[ $el -le 8 ] || fail "$job: the agent took $el s to stop (want <= 8)"
	[ $rc -ne 0 ] && [ $rc -lt 124 ] || { cat "$T/$job.out" >&2; fail "$job: agent exited $rc"; }
	expect_grep "$job: message" "malformed rendezvous record 'crun/$job/$4'.*unknown end kind 'Q'" "$T/$job.out"
}
# 11. An "end" record of an unknown kind, the mark saying "read end".
forged_running running "Qnonsense" 1 r0/end
# 12. A mark that carries an end of an unknown kind itself.
forged_running marked "Xsomething" "Qnonsense" r0/end/0

# 13. A forged join counter of 1M nodes (with a config allowing them):
# `crun status` reads only the descriptors that exist. Before, it held one
# slot per counted node (400 MB, 8 s); under a 150 MB address-space limit it
# aborted. Now it answers in bounded time and memory, listing the one node.
$RAW 127.0.0.1 $PORT set crun/job bigjoin set crun/bigjoin/config "nnodes=1:1000000 backend=c10d proto=3" \
	set crun/bigjoin/r0/join 1000000 set crun/bigjoin/r0/node/1 "0 0 1 7 hx 10.0.0.1 default" >/dev/null ||
	fail "bigjoin: cannot seed the store"
( ulimit -v "$(vmem_limit 150000)"; exec timeout 10 "$CRUN" status --rdzv_endpoint="127.0.0.1:$PORT" ) >"$T/bigjoin.out" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$T/bigjoin.out" >&2; fail "bigjoin: crun status exited $rc under a 150 MB limit"; }
expect_grep "bigjoin: the described node is listed" "hx .*10.0.0.1 .*joining" "$T/bigjoin.out"
note "bigjoin: a forged 1M join counter: crun status answered within 150 MB"

# 14. `crun status` shows "excluded" as the agents read it. An entry ending
# far beyond exclude_for (forged) is read by every agent as no node left out
# (test_rdzv_exclude), and a job whose config leaves no node out never reads
# the record: before, the status listed such entries as nodes left out.
# excl JOB CONFIG UNTIL: seed a job of one joined node and an "excluded"
# record naming n9 until UNTIL; its status text goes to $T/JOB.out.
excl() {
	$RAW 127.0.0.1 $PORT set crun/job "$1" set "crun/$1/config" "$2" set "crun/$1/r0/join" 1 \
		set "crun/$1/r0/node/1" "0 0 1 7 hx 10.0.0.1 default" \
		set "crun/$1/excluded" "1 n9 10.0.0.9#9 $3 0 2" >/dev/null || fail "$1: cannot seed the store"
	timeout 10 "$CRUN" status --rdzv_endpoint="127.0.0.1:$PORT" >"$T/$1.out" 2>&1 ||
		{ cat "$T/$1.out" >&2; fail "$1: crun status failed"; }
}
now=$(date +%s)
excl exclfar "nnodes=1:2 backend=c10d exclude=2:60 proto=3" 1099511627776
expect_grep "exclfar: none, and why" "^left out: none (the agents ignore the 'excluded' record: n9 (10.0.0.9) is left out [0-9]* s ahead, more than exclude_for=60 s allows)" "$T/exclfar.out"
expect_nogrep "exclfar: n9 not listed" "^left out: n9" "$T/exclfar.out"
timeout 10 "$CRUN" status --rdzv_endpoint="127.0.0.1:$PORT" --json >"$T/exclfar.json" 2>&1 || fail "exclfar: crun status --json failed"
"$PYTHON" -c '
import json, sys
x = json.load(open(sys.argv[1]))
assert x["excluded"] == [] and "more than exclude_for=60 s allows" in x["excluded_ignored"], x
' "$T/exclfar.json" || fail "exclfar: --json: $(cat "$T/exclfar.json")"
excl excloff "nnodes=1:2 backend=c10d proto=3" $((now + 30))
expect_grep "excloff: none, and why" "^left out: none (the agents ignore the 'excluded' record: the job's config leaves no node out)" "$T/excloff.out"
excl exclnear "nnodes=1:2 backend=c10d exclude=2:60 proto=3" $((now + 30))
expect_grep "exclnear: n9 listed" "^left out: n9 (10.0.0.9) after 2 failed rounds in a row" "$T/exclnear.out"
note "excluded: far and off-config entries shown as none, with why; a near one listed"

# The store survived every forged job and still serves a clean one.
$RAW 127.0.0.1 $PORT set crun/job clean >/dev/null || fail "cannot reset crun/job"
timeout 30 "$CRUN" --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=c10d \
	--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=clean --rdzv_conf=last_call_timeout=1 /bin/true >"$T/clean.out" 2>&1 ||
	{ cat "$T/clean.out" >&2; fail "a clean job after the forged ones failed"; }
kill -0 $spid || fail "crun store died"
exit 0
