#!/bin/sh
# `crun status --stacks`: a 2-node loopback job (2 workers + 1) of Python
# workers waiting in known functions (tests/integration/py/stacks_sleep.py:
# rank 1 in straggle, the others in barrier). status asks every node for
# its ranks' live stacks and prints them grouped (the summary line, each
# distinct stack once), as --json too; asked again, a new request is
# answered again; hostile requests in the store (garbage, a huge value)
# leave the agents unmoved; a node that does not answer in time is named;
# forged answers (garbage, too large) are one line naming the node; agents
# without py-spy say so in one line each; the etcd backend the same.
# Nothing is stopped: the workers keep their pids, the job finishes 0 in
# generation 0.
. tests/integration/lib.sh
. tests/integration/lib_etcd.sh
RAW="$PYTHON $TOP/tests/integration/py/raw_store.py"

SPY=$TOP/.venv/bin/py-spy
[ -x "$SPY" ] || SPY=$(command -v py-spy 2>/dev/null) || true
[ -n "$SPY" ] && [ -x "$SPY" ] || skip "no py-spy (.venv/bin/py-spy: pip install py-spy==0.4.3)"
mkdir "$T/spy"
ln -s "$SPY" "$T/spy/py-spy"
WPY=/usr/bin/python3 # the workers' interpreter: no py-spy beside it
[ -x "$WPY" ] || skip "no $WPY"
W=$TOP/tests/integration/py/stacks_sleep.py
LB=$(grep -n 'time.sleep' "$W" | sed -n 1p | cut -d: -f1) # in barrier
LS=$(grep -n 'time.sleep' "$W" | sed -n 2p | cut -d: -f1) # in straggle
# A stopped agent must not be declared dead while it is (section 4).
KA="keep_alive_interval=0.3,keep_alive_max_attempt=100,last_call_timeout=1,join_timeout=20"

# agent NAME NPROC PATH: an agent of the 2-node job $JOB on $BK at $EP.
agent() {
	_name=$1 _np=$2 _path=$3
	env PATH="$_path" PYTHON_EXEC="$WPY" "$CRUN" --nnodes=2 --nproc_per_node="$_np" \
		--rdzv_backend="$BK" --rdzv_endpoint="$EP" --rdzv_id="$JOB" --max_restarts=0 \
		--rdzv_conf="$KA" "$W" "$T/$JOB" >"$T/$JOB.$_name.out" 2>&1 &
	eval "pid_$_name=\$!"
	at_exit "kill -9 $! 2>/dev/null"
}
# st [flags...]: crun status against the job; $T/st.out, $T/st.err, $RC.
st() {
	"$CRUN" status --rdzv_backend="$BK" --rdzv_endpoint="$EP" --rdzv_id="$JOB" "$@" \
		>"$T/st.out" 2>"$T/st.err"
	RC=$?
}
# j EXPR: a Python expression over the JSON in $T/st.out (as j).
j() { "$PYTHON" -S -E -c "import json,sys; j=json.load(open(sys.argv[1])); print($1)" "$T/st.out"; }
all_up() { [ -s "$T/$JOB/pid.0" ] && [ -s "$T/$JOB/pid.1" ] && [ -s "$T/$JOB/pid.2" ]; }
# start PATH: the job's two agents (a: ranks 0-1, b: rank 2), workers up.
start() {
	mkdir -p "$T/$JOB"
	agent a 2 "$1"
	# a hosts the c10d store (section 4 stops b, never the store).
	[ "$BK" = etcd ] || wait_for 10 listening "${EP#*:}" || fail "$JOB: agent a never listened"
	agent b 1 "$1"
	wait_for 40 all_up || { cat "$T/$JOB".*.out >&2; fail "$JOB: the workers never started"; }
	PIDS="$(cat "$T/$JOB/pid.0") $(cat "$T/$JOB/pid.1") $(cat "$T/$JOB/pid.2")"
}
# finish: the workers were never stopped; the job ends 0 in generation 0.
finish() {
	for p in $PIDS; do kill -0 "$p" 2>/dev/null || fail "$JOB: worker $p was stopped"; done
	touch "$T/$JOB/stop"
	wait_pid 30 "$pid_a" "$T/$JOB.a.out"
	expect_eq "$JOB: agent a exit status" $? 0
	wait_pid 30 "$pid_b" "$T/$JOB.b.out"
	expect_eq "$JOB: agent b exit status" $? 0
	for r in 0 1 2; do
		expect_eq "$JOB: rank $r finished in generation 0" "$(cat "$T/$JOB/done.$r" 2>/dev/null)" 0
	done
}
# grouped HOST: the stacks in $T/st.out, as the workers wait.
grouped() {
	expect_eq "$JOB: summary line" "$(sed -n 2p "$T/st.out")" \
		"ranks 0,2 in barrier (stacks_sleep.py:$LB) on $1; rank 1 in straggle (stacks_sleep.py:$LS) on $1"
	expect_grep "$JOB: ranks 0 and 2 share one stack" "^--- ranks 0,2 ($1): barrier (stacks_sleep.py:$LB)$" "$T/st.out"
	expect_grep "$JOB: rank 1 has its own" "^--- rank 1 ($1): straggle (stacks_sleep.py:$LS)$" "$T/st.out"
	expect_grep "$JOB: the stack's frames" "^    main (stacks_sleep.py:" "$T/st.out"
	expect_eq "$JOB: each distinct stack once" "$(grep -c '^    barrier (stacks_sleep.py' "$T/st.out")" 1
}

H=$(hostname)

# 1. c10d, py-spy on the agents' PATH.
BK=c10d EP=127.0.0.1:$(free_port) JOB=stk
note "1. c10d job at $EP, py-spy on the agents' PATH"
start "$T/spy:/usr/bin:/bin"
st --stacks
expect_eq "stk: --stacks exit status" "$RC" 0
expect_eq "stk: first line" "$(sed -n 1p "$T/st.out")" "stacks of job 'stk', round 0: 2 of 2 node(s) answered"
grouped "$H"
expect_eq "stk: nothing on stderr" "$(cat "$T/st.err")" ""
st --stacks --json
expect_eq "stk: --json exit status" "$RC" 0
expect_eq "stk: json answered" "$(j "(j['nodes_asked'], j['nodes_answered'], j['round'])")" "(2, 2, 0)"
expect_eq "stk: json groups" "$(j "[(g['ranks'], g['where']) for g in j['groups']]")" \
	"[([0, 2], 'barrier (stacks_sleep.py:$LB)'), ([1], 'straggle (stacks_sleep.py:$LS)')]"
expect_eq "stk: json ranks taken" "$(j "sorted((r['rank'], r['taken'], 'straggle' in r['stack'] or 'barrier' in r['stack']) for r in j['ranks'])")" \
	"[(0, True, True), (1, True, True), (2, True, True)]"
expect_eq "stk: json summary" "$(j "j['summary']")" \
	"ranks 0,2 in barrier (stacks_sleep.py:$LB) on $H; rank 1 in straggle (stacks_sleep.py:$LS) on $H"
expect_eq "stk: json none missing" "$(j "(j['not_answered'], j['errors'])")" "([], [])"

# 2. Hostile requests in the store: garbage and 120 kB (argv's bound). The agents ignore
#    them and still answer the next real request.
note "2. hostile stacks requests"
# hb: the nodes' heartbeat counters, summed (each heartbeat also reads the
# request).
hb() { st --json --hb_wait=0 && j "sum(n['heartbeat'] or 0 for n in j['nodes'])"; }
# beats N: wait until every node has beaten N times more than at $HB0.
beats() { _h=$(hb) && [ "$_h" -ge $((HB0 + 2 * $1)) ]; }
$RAW 127.0.0.1 "${EP#*:}" set "crun/$JOB/stacks_req" "zz;rm -rf 0" >/dev/null || fail "cannot forge a request"
HB0=$(hb)
wait_for 10 beats 3 || fail "no heartbeats after a garbage request"
$RAW 127.0.0.1 "${EP#*:}" set "crun/$JOB/stacks_req" "$("$PYTHON" -c 'print("a" * 120000 + " 0")')" >/dev/null ||
	fail "cannot forge a huge request"
HB0=$(hb)
wait_for 10 beats 3 || fail "no heartbeats after a huge request"
for p in $pid_a $pid_b; do kill -0 "$p" 2>/dev/null || fail "an agent died of a hostile request"; done
st --stacks
expect_eq "stk: after hostile requests, exit status" "$RC" 0
grouped "$H"

# 3. A request written by anyone names its nonce: the agents answer it.
$RAW 127.0.0.1 "${EP#*:}" set "crun/$JOB/stacks_req" "c0ffee 0" >/dev/null || fail "cannot write a request"
answered() { $RAW 127.0.0.1 "${EP#*:}" get "crun/$JOB/stacks/c0ffee/$1" 2>/dev/null | grep -q "^crun-stacks 1"; }
wait_for 10 answered 0 || fail "group rank 0 did not answer a request by nonce"
wait_for 10 answered 1 || fail "group rank 1 did not answer a request by nonce"

# 4. A node that does not answer in time is named (its agent stopped for
#    the while; the others' answers are printed all the same).
note "4. a node that does not answer"
kill -STOP "$pid_b"
st --stacks --stacks_wait=2
kill -CONT "$pid_b"
expect_eq "stk: one node silent, exit status" "$RC" 3
expect_eq "stk: one node silent, first line" "$(sed -n 1p "$T/st.out")" \
	"stacks of job 'stk', round 0: 1 of 2 node(s) answered"
expect_grep "stk: one node silent, named" "^crun status: $H (group rank 1) did not answer within 2.0 s$" "$T/st.err"
expect_eq "stk: the other's answer" "$(sed -n 2p "$T/st.out")" \
	"rank 0 in barrier (stacks_sleep.py:$LB) on $H; rank 1 in straggle (stacks_sleep.py:$LS) on $H"

# 4b. While b is stopped, a forger answers for it (group rank 1): garbage,
#     then more than an answer may hold. One line each names the node; the
#     real node's answer is printed all the same.
for kind in garbage huge; do
	kill -STOP "$pid_b"
	rm -f "$T/forge.ready"
	"$PYTHON" "$TOP/tests/integration/py/stacks_forge.py" 127.0.0.1 "${EP#*:}" "$JOB" 1 $kind "$T/forge.ready" &
	fpid=$!
	wait_for 10 test -e "$T/forge.ready" || fail "the forger never started"
	st --stacks --stacks_wait=5
	wait "$fpid"
	frc=$?
	kill -CONT "$pid_b"
	expect_eq "stk: $kind forged" "$frc" 0
	expect_eq "stk: $kind answer, exit status" "$RC" 3
	case $kind in
	garbage) want="malformed stacks answer: not a stacks answer" ;;
	huge) want="malformed stacks answer: larger than an answer may be" ;;
	esac
	expect_eq "stk: $kind answer, one line" "$(cat "$T/st.err")" "crun status: $H (group rank 1): $want"
	expect_eq "stk: $kind answer, the other's" "$(sed -n 2p "$T/st.out")" \
		"rank 0 in barrier (stacks_sleep.py:$LB) on $H; rank 1 in straggle (stacks_sleep.py:$LS) on $H"
done
finish

# 5. No py-spy on the agents' PATH (nor beside the workers' interpreter):
#    one line per node says so; still nothing is stopped.
if [ -x /usr/bin/py-spy ] || [ -x /bin/py-spy ]; then
	note "5. skipped: py-spy in /usr/bin"
else
	BK=c10d EP=127.0.0.1:$(free_port) JOB=nospy
	note "5. c10d job at $EP, no py-spy"
	start /usr/bin:/bin
	st --stacks
	expect_eq "nospy: exit status" "$RC" 0
	expect_eq "nospy: first line" "$(sed -n 1p "$T/st.out")" "stacks of job 'nospy', round 0: 2 of 2 node(s) answered"
	expect_eq "nospy: no stacks" "$(sed -n 2p "$T/st.out")" "no stacks taken"
	expect_eq "nospy: one line per node" "$(grep -c 'no live Python stack without py-spy' "$T/st.out")" 2
	st --stacks --json
	expect_eq "nospy: json" "$(j "(j['nodes_answered'], [r['taken'] for r in j['ranks']], j['groups'])")" \
		"(2, [False, False, False], [])"
	finish
fi

# 6. The etcd backend.
if [ -x "$ETCD" ] && [ -x "$ETCDCTL" ]; then
	etcd_cluster 1
	BK=etcd EP=$ETCD_EP JOB=etcdstk
	note "6. etcd job at $EP"
	start "$T/spy:/usr/bin:/bin"
	st --stacks
	expect_eq "etcdstk: exit status" "$RC" 0
	expect_eq "etcdstk: first line" "$(sed -n 1p "$T/st.out")" "stacks of job 'etcdstk', round 0: 2 of 2 node(s) answered"
	grouped "$H"
	st --stacks --json
	expect_eq "etcdstk: json" "$(j "(j['nodes_answered'], [g['ranks'] for g in j['groups']])")" "(2, [[0, 2], [1]])"
	finish
else
	note "6. skipped: no etcd ($ETCD)"
fi
exit 0
