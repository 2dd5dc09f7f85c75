#!/bin/sh
# `crun status --stacks` across two network-namespace hosts: h1 runs ranks
# 0-1 and the c10d store, h2 rank 2 (workers: py/stacks_sleep.py, rank 1 in
# straggle, the others in barrier). Run from h2, status groups ranks 0 and 2
# across both hosts (no host named) and names h1 for rank 1; --json agrees.
# Nothing is stopped: the job finishes 0 in generation 0.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh

SPY=$TOP/.venv/bin/py-spy
[ -x "$SPY" ] || SPY=$(command -v py-spy 2>/dev/null) || true
[ -n "$SPY" ] && [ -x "$SPY" ] || skip "no py-spy (.venv/bin/py-spy: pip install py-spy==0.4.3)"
[ -x /usr/bin/python3 ] || skip "no /usr/bin/python3"
netns_setup 2
mkdir "$T/spy" "$T/job"
ln -s "$SPY" "$T/spy/py-spy"
W=$TOP/tests/integration/py/stacks_sleep.py
LB=$(grep -n 'time.sleep' "$W" | sed -n 1p | cut -d: -f1)
LS=$(grep -n 'time.sleep' "$W" | sed -n 2p | cut -d: -f1)
KA="keep_alive_interval=0.3,last_call_timeout=1,join_timeout=30"

# agent NAME HOST NPROC
agent() {
	netns_spawn "$2" "$T/$1.out" env PATH="$T/spy:/usr/bin:/bin" PYTHON_EXEC=/usr/bin/python3 \
		"$CRUN" --nnodes=2 --nproc_per_node="$3" --rdzv_backend=c10d --rdzv_endpoint=h1:29400 \
		--rdzv_id=nsjob --max_restarts=0 --rdzv_conf="$KA" "$W" "$T/job"
	eval "pid_$1=\$NETNS_PID"
}
st() {
	netns_exec h2 "$CRUN" status --rdzv_endpoint=h1:29400 --rdzv_id=nsjob --stacks "$@" \
		>"$T/st.out" 2>"$T/st.err"
	RC=$?
}
j() { "$PYTHON" -S -E -c "import json,sys; j=json.load(open(sys.argv[1])); print($1)" "$T/st.out"; }
all_up() { [ -s "$T/job/pid.0" ] && [ -s "$T/job/pid.1" ] && [ -s "$T/job/pid.2" ]; }

agent a h1 2
agent b h2 1
wait_for 40 all_up || { cat "$T/a.out" "$T/b.out" >&2; fail "the workers never started"; }
PIDS="$(cat "$T/job/pid.0") $(cat "$T/job/pid.1") $(cat "$T/job/pid.2")"

st
[ "$RC" = 0 ] || { cat "$T/st.out" "$T/st.err" >&2; fail "--stacks exit status $RC"; }
expect_eq "first line" "$(sed -n 1p "$T/st.out")" "stacks of job 'nsjob', round 0: 2 of 2 node(s) answered"
expect_eq "summary line" "$(sed -n 2p "$T/st.out")" \
	"ranks 0,2 in barrier (stacks_sleep.py:$LB); rank 1 in straggle (stacks_sleep.py:$LS) on h1"
expect_grep "ranks 0 and 2 share one stack, on both hosts" "^--- ranks 0,2 (h1, h2): barrier (stacks_sleep.py:$LB)$" "$T/st.out"
expect_grep "rank 1 on h1" "^--- rank 1 (h1): straggle (stacks_sleep.py:$LS)$" "$T/st.out"
st --json
expect_eq "--json exit status" "$RC" 0
expect_eq "json groups" "$(j "[(g['ranks'], g['hosts']) for g in j['groups']]")" \
	"[([0, 2], ['h1', 'h2']), ([1], ['h1'])]"
expect_eq "json ranks' hosts" "$(j "sorted((r['rank'], r['host']) for r in j['ranks'])")" \
	"[(0, 'h1'), (1, 'h1'), (2, 'h2')]"

for p in $PIDS; do kill -0 "$p" 2>/dev/null || fail "worker $p was stopped"; done
touch "$T/job/stop"
wait_pid 30 "$pid_a" "$T/a.out"
expect_eq "agent a exit status" $? 0
wait_pid 30 "$pid_b" "$T/b.out"
expect_eq "agent b exit status" $? 0
for r in 0 1 2; do
	expect_eq "rank $r finished in generation 0" "$(cat "$T/job/done.$r" 2>/dev/null)" 0
done
exit 0
