#!/bin/sh
# `crun status`: a 2-node loopback job (2 workers + 1) read like an agent
# that does not join: text and --json (both nodes, ranks, round, generation
# 0, heartbeats); after a worker failure and restart, generation, restarts
# and the last failure (rank, exit code); a forged record named, not a
# crash; a wrong run id, nothing on the endpoint and an ended job exit 1;
# an endpoint that accepts and never answers exits 3 with either backend;
# the rendezvous secret (without it a clean refusal, with it the job); and
# the etcd backend on a real etcd member.
. tests/integration/lib.sh
. tests/integration/lib_etcd.sh

# The agents' crun (STATUS_AGENT_CRUN: e.g. an older build, to show that
# status needs the records the agents write now).
ACRUN=${STATUS_AGENT_CRUN:-$CRUN}
KA="keep_alive_interval=0.2,last_call_timeout=1,join_timeout=20"
# The workers run until $T/stop exists; rank 2 exits 3 in generation 0
# once $T/fail exists.
W='while :; do [ -e "$D/stop" ] && exit 0; if [ -e "$D/fail" ] && [ "$RANK" = 2 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then exit 3; fi; sleep 0.05; done'
export D="$T"

# agent NAME NPROC [crun flags...]: a c10d agent of a 2-node job, in background.
agent() {
	_name=$1 _np=$2; shift 2
	"$ACRUN" --nnodes=2 --nproc_per_node="$_np" --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id="$JOB" --max_restarts=2 "$@" \
		/bin/sh -c "$W" >"$T/$_name.out" 2>&1 &
	eval "pid_$_name=\$!"
	at_exit "kill -9 $! 2>/dev/null"
}
# st [flags...]: crun status against the c10d job; stdout in $T/st.out,
# stderr in $T/st.err, the exit status in $RC.
st() {
	"$CRUN" status --rdzv_endpoint="127.0.0.1:$PORT" "$@" >"$T/st.out" 2>"$T/st.err"
	RC=$?
}
# j EXPR: evaluate a Python expression over the JSON in $T/st.out (as j).
j() { "$PYTHON" -S -E -c "import json,sys; j=json.load(open(sys.argv[1])); print($1)" "$T/st.out"; }
running_with() { st --rdzv_id="$JOB" --json && [ "$RC" = 0 ] && [ "$(j "len(j['nodes'])")" = "$1" ] && [ "$(j "j['state']")" = running ]; }
generation_is() { st --rdzv_id="$JOB" --json && [ "$RC" = 0 ] && [ "$(j "j['generation']")" = "$1" ]; }
gone() { st --rdzv_id="$JOB" --timeout=1 && [ "$RC" = 1 ]; }

# 0. Usage errors exit 2 with one line; --help documents the command.
"$CRUN" status >"$T/u.out" 2>&1
expect_eq "no endpoint: exit 2" $? 2
expect_grep "no endpoint named" "missing --rdzv_endpoint" "$T/u.out"
expect_eq "no endpoint: one line" "$(wc -l <"$T/u.out")" 1
"$CRUN" status --rdzv_endpoint=127.0.0.1:1 --timeout=0 >"$T/u.out" 2>&1
expect_eq "bad timeout: exit 2" $? 2
expect_grep "bad timeout named" 'invalid --timeout "0"' "$T/u.out"
"$CRUN" status --rdzv_endpoint=127.0.0.1:1 --rdzv_backend=zk >"$T/u.out" 2>&1
expect_eq "bad backend: exit 2" $? 2
"$CRUN" status --help >"$T/help.out" 2>&1
expect_eq "help: exit 0" $? 0
expect_grep "help names --json" "--json" "$T/help.out"
expect_grep "help names the exit status" "Exit status" "$T/help.out"

# 1. Nothing on the endpoint: exit 1, one line, within the bound.
PORT=$(free_port) JOB=stjob
t0=$(now_ms)
st --timeout=1
expect_eq "nothing there: exit 1" "$RC" 1
expect_grep "nothing there: says so" "no job at 127.0.0.1:$PORT" "$T/st.err"
expect_eq "nothing there: one line" "$(wc -l <"$T/st.err")" 1
[ $(( $(now_ms) - t0 )) -lt 5000 ] || fail "status took $(( $(now_ms) - t0 )) ms with --timeout=1"

# Something else on the port (an HTTP server): it waits for the end of an
# HTTP request line, so like any silent endpoint it cannot be reached (exit
# 3); should it answer (an HTTP error for what it cannot parse), that is not
# a crun store (exit 1). Either way one line says which, and nothing else
# passes.
HPORT=$(free_port)
"$PYTHON" -m http.server "$HPORT" --bind 127.0.0.1 >/dev/null 2>&1 &
hpid=$!
at_exit "kill $hpid 2>/dev/null"
wait_for 10 listening "$HPORT" || fail "the HTTP server never listened"
"$CRUN" status --rdzv_endpoint="127.0.0.1:$HPORT" --timeout=2 >"$T/st.out" 2>"$T/st.err"
rc=$?
case $rc in
3) expect_grep "http there: says so" "cannot reach the rendezvous at 127.0.0.1:$HPORT: " "$T/st.err" ;;
1) expect_grep "http there: says so" "no job at 127.0.0.1:$HPORT: it answers, but not as a crun store" "$T/st.err" ;;
*) cat "$T/st.err" >&2; fail "http there: exit $rc, want 3 (silent) or 1 (not a crun store)" ;;
esac
expect_eq "http there: one line" "$(wc -l <"$T/st.err")" 1
kill $hpid

# An endpoint that accepts and never answers cannot be reached: exit 3 with
# either backend (c10d too: not 1, which would mean "no job").
SPORT=$(free_port)
"$PYTHON" -c '
import socket, sys, time
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
held, end = [], time.time() + 60
s.settimeout(1)
while time.time() < end:
    try:
        held.append(s.accept()[0])
    except socket.timeout:
        pass
' "$SPORT" >/dev/null 2>&1 &
spid=$!
at_exit "kill $spid 2>/dev/null"
wait_for 10 listening "$SPORT" || fail "the silent server never listened"
for b in c10d etcd; do
	t0=$(now_ms)
	"$CRUN" status --rdzv_backend=$b --rdzv_endpoint="127.0.0.1:$SPORT" --timeout=1 >"$T/st.out" 2>"$T/st.err"
	expect_eq "silent $b endpoint: exit 3" $? 3
	expect_eq "silent $b endpoint: one line" "$(wc -l <"$T/st.err")" 1
	[ $(( $(now_ms) - t0 )) -lt 5000 ] || fail "silent $b: status took $(( $(now_ms) - t0 )) ms with --timeout=1"
	[ $b = etcd ] || expect_grep "silent c10d endpoint: says so" "cannot reach the rendezvous at 127.0.0.1:$SPORT" "$T/st.err"
done
kill $spid

# 2. A running job: a (2 workers, the store host) and b (1 worker).
note "2. c10d job on 127.0.0.1:$PORT"
agent a 2 --rdzv_conf="$KA"
wait_for 10 listening "$PORT" || { cat "$T/a.out" >&2; fail "agent a never served the store"; }
agent b 1 --rdzv_conf="$KA"
wait_for 30 running_with 2 || { cat "$T/st.err" "$T/a.out" "$T/b.out" >&2; fail "status never showed 2 running nodes"; }
expect_eq "json run id" "$(j "j['run_id']")" "$JOB"
expect_eq "json round" "$(j "j['round']")" 0
expect_eq "json generation" "$(j "j['generation']")" 0
expect_eq "json restarts" "$(j "(j['restarts'], j['max_restarts'])")" "(0, 2)"
expect_eq "json ranks" "$(j "[n['ranks'] for n in j['nodes']]")" "[[0, 1], [2]]"
expect_eq "json nproc" "$(j "[n['nproc'] for n in j['nodes']]")" "[2, 1]"
expect_eq "json group ranks" "$(j "[n['group_rank'] for n in j['nodes']]")" "[0, 1]"
expect_eq "json world size" "$(j "set(n['world_size'] for n in j['nodes'])")" "{3}"
expect_eq "json addresses" "$(j "all(n['addr'] and n['host'] for n in j['nodes'])")" True
# Both agents beat every 0.2 s: each counter is seen moving, recently.
expect_eq "json heartbeats seen" "$(j "all(n['heartbeat_age'] is not None and 0 <= n['heartbeat_age'] < 1 for n in j['nodes'])")" True
expect_eq "json no failure yet" "$(j "j['last_failure']")" None
st --rdzv_id="$JOB"
expect_eq "text: exit 0" "$RC" 0
expect_grep "text: state" "^job '$JOB' at 127.0.0.1:$PORT (c10d): running" "$T/st.out"
expect_grep "text: round, generation" "^round 0, generation 0, restarts 0 of 2, nodes 2" "$T/st.out"
expect_grep "text: node 0 ranks" "^  0 .* 2 0-1 .* s ago" "$T/st.out"
expect_grep "text: node 1 ranks" "^  1 .* 1 2 .* s ago" "$T/st.out"
expect_grep "text: no failure" "^last failure: none" "$T/st.out"
# Without --rdzv_id: the job the endpoint serves.
st --json
expect_eq "no run id: exit 0" "$RC" 0
expect_eq "no run id: the endpoint's job" "$(j "j['run_id']")" "$JOB"

# 3. A wrong run id: exit 1, one line naming both.
st --rdzv_id=nosuchjob
expect_eq "wrong id: exit 1" "$RC" 1
expect_grep "wrong id: named" "no job 'nosuchjob' on this endpoint: it serves job '$JOB'" "$T/st.err"
expect_eq "wrong id: one line" "$(wc -l <"$T/st.err")" 1

# 4. Rank 2 (b's only worker) exits 3: one restart, generation 1.
touch "$T/fail"
wait_for 30 generation_is 1 || { cat "$T/st.out" "$T/st.err" "$T/a.out" "$T/b.out" >&2; fail "status never showed generation 1"; }
expect_eq "after failure: round" "$(j "j['round']")" 1
expect_eq "after failure: restarts" "$(j "j['restarts']")" 1
expect_eq "after failure: failure" "$(j "(f:=j['last_failure']) and (f['rank'], f['local_rank'], f['exit_code'], f['signal'], f['round'])")" "(2, 0, 3, None, 0)"
expect_eq "after failure: failure time" "$(j "0 <= j['last_failure']['age'] < 60")" True
expect_eq "after failure: both nodes again" "$(j "[n['ranks'] for n in j['nodes']]")" "[[0, 1], [2]]"
st --rdzv_id="$JOB"
expect_grep "text after failure" "^round 1, generation 1, restarts 1 of 2" "$T/st.out"
expect_grep "text: last failure" "^last failure: rank 2 (local rank 0) on .* exited with 3 in round 0 at 20" "$T/st.out"

# 5. A forged record (anyone who reaches the store can write one): an
# error naming the key, exit 3, no crash; the job itself is unharmed.
# raw_store.py writes exactly the key given (a GET after the SET: in order).
forge() {
	"$PYTHON" "$TOP/tests/integration/py/raw_store.py" 127.0.0.1 "$PORT" set "$1" "$2" get "$1" >/dev/null
}
forge "crun/$JOB/failure" "1 99999999999999999999 x" || fail "could not write the forged record"
st --rdzv_id="$JOB"
expect_eq "forged failure: exit 3" "$RC" 3
expect_grep "forged failure: key named" "malformed rendezvous record 'crun/$JOB/failure'" "$T/st.err"
expect_eq "forged failure: one line" "$(wc -l <"$T/st.err")" 1
forge "crun/$JOB/params" "max_restarts=-1 keep_alive_ms=5" || fail "could not write the forged record"
forge "crun/$JOB/failure" "0 1700000000000 3 rank 2 (local rank 0) on h exited with 3" || fail "could not restore"
st --rdzv_id="$JOB"
expect_eq "forged params: exit 3" "$RC" 3
expect_grep "forged params: key and field named" "'crun/$JOB/params': max_restarts '-1' is not a number" "$T/st.err"
forge "crun/$JOB/params" "max_restarts=2 keep_alive_ms=200" || fail "could not restore"
forge "crun/$JOB/r1/assign/1" "0 2 0 3 0 3 9" || fail "could not write the forged record"
st --rdzv_id="$JOB"
expect_eq "forged assignment: exit 3" "$RC" 3
expect_grep "forged assignment: key named" "'crun/$JOB/r1/assign/1'" "$T/st.err"

# 6. The job ends: its store goes with the agents; status says not found.
touch "$T/stop"
wait_for 30 exited "$pid_a" || fail "agent a did not finish"
wait_for 30 exited "$pid_b" || fail "agent b did not finish"
wait_for 10 gone || { cat "$T/st.err" >&2; fail "status of an ended job did not exit 1"; }
rm -f "$T/stop" "$T/fail"

# 7. The rendezvous secret: without it a clean refusal, with it the job.
umask 077
printf 'status-test-secret\n' >"$T/secret"
PORT=$(free_port) JOB=secretjob
note "7. c10d job with a secret on 127.0.0.1:$PORT"
agent a 2 --rdzv_conf="$KA,secret_file=$T/secret"
wait_for 10 listening "$PORT" || { cat "$T/a.out" >&2; fail "agent a never served the store"; }
agent b 1 --rdzv_conf="$KA,secret_file=$T/secret"
secret_running() { st --rdzv_id="$JOB" --rdzv_conf="secret_file=$T/secret" --json && [ "$RC" = 0 ] && [ "$(j "len(j['nodes'])")" = 2 ]; }
wait_for 30 secret_running || { cat "$T/st.err" "$T/a.out" >&2; fail "status with the secret never showed the job"; }
st --rdzv_id="$JOB" --timeout=2
expect_eq "no secret: exit 3" "$RC" 3
expect_grep "no secret: says why" "wants a secret" "$T/st.err"
expect_eq "no secret: one line" "$(wc -l <"$T/st.err")" 1
CRUN_RDZV_SECRET_FILE="$T/secret" st --rdzv_id="$JOB" --json
expect_eq "secret from the environment: exit 0" "$RC" 0
expect_eq "secret from the environment: ranks" "$(j "[n['ranks'] for n in j['nodes']]")" "[[0, 1], [2]]"
printf 'another-secret\n' >"$T/secret2"
st --rdzv_id="$JOB" --rdzv_secret_file="$T/secret2" --timeout=2
expect_eq "wrong secret: exit 3" "$RC" 3
touch "$T/stop"
wait_for 30 exited "$pid_a" || fail "agent a (secret) did not finish"
wait_for 30 exited "$pid_b" || fail "agent b (secret) did not finish"
rm -f "$T/stop"

# 8. The etcd backend, on a real etcd member.
if [ -x "$ETCD" ] && [ -x "$ETCDCTL" ]; then
	etcd_cluster 1
	EP=$ETCD_EP JOB=etcdjob
	note "8. etcd job at $EP"
	for x in a:2 b:1; do
		"$ACRUN" --nnodes=2 --nproc_per_node="${x#*:}" --rdzv_backend=etcd --rdzv_endpoint="$EP" \
			--rdzv_id="$JOB" --max_restarts=1 --rdzv_conf="$KA,lease_ttl=2" \
			/bin/sh -c "$W" >"$T/e${x%:*}.out" 2>&1 &
		eval "pid_e${x%:*}=\$!"
		at_exit "kill -9 $! 2>/dev/null"
	done
	est() {
		"$CRUN" status --rdzv_backend=etcd --rdzv_endpoint="$EP" "$@" >"$T/st.out" 2>"$T/st.err"
		RC=$?
	}
	etcd_running() { est --rdzv_id="$JOB" --json && [ "$RC" = 0 ] && [ "$(j "len(j['nodes'])")" = 2 ] && [ "$(j "j['state']")" = running ]; }
	wait_for 30 etcd_running || { cat "$T/st.err" "$T/ea.out" "$T/eb.out" >&2; fail "etcd: status never showed 2 running nodes"; }
	expect_eq "etcd: ranks" "$(j "[n['ranks'] for n in j['nodes']]")" "[[0, 1], [2]]"
	expect_eq "etcd: round, generation" "$(j "(j['round'], j['generation'], j['backend'])")" "(0, 0, 'c10d')"
	expect_eq "etcd: heartbeats seen" "$(j "all(n['heartbeat_age'] is not None for n in j['nodes'])")" True
	keys_before=$(etcd_keys "/crun/$JOB/" | grep -c .)
	est --rdzv_id=nosuchjob --timeout=3
	expect_eq "etcd: wrong id exit 1" "$RC" 1
	expect_grep "etcd: wrong id says so" "no job" "$T/st.err"
	expect_eq "etcd: the reader wrote nothing" "$(etcd_keys "/crun/nosuchjob/" | grep -c .)" 0
	est --rdzv_id="$JOB"
	expect_eq "etcd: text exit 0" "$RC" 0
	expect_grep "etcd: text" "^round 0, generation 0, restarts 0 of 1, nodes 2" "$T/st.out"
	expect_eq "etcd: no key added by status" "$(etcd_keys "/crun/$JOB/" | grep -c .)" "$keys_before"
	touch "$T/stop"
	wait_for 30 exited "$pid_ea" || fail "etcd agent a did not finish"
	wait_for 30 exited "$pid_eb" || fail "etcd agent b did not finish"
	etcd_gone() { est --rdzv_id="$JOB" --timeout=3 && [ "$RC" = 1 ]; }
	wait_for 20 etcd_gone || { cat "$T/st.out" "$T/st.err" >&2; fail "etcd: status of an ended job did not exit 1"; }
else
	note "8. skipped: no etcd ($ETCD)"
fi
exit 0
