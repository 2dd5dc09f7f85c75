#!/bin/sh
# Leaving out a failing node (--rdzv_conf=exclude_after=K,
# exclude_for=S) on loopback: three agents a (store host), b, c, one worker
# each, --nnodes=2:3 unless said otherwise. c's worker fails at once (exit 3)
# whenever it runs; a's and b's succeed after a while. Most scenarios give each
# agent its own --local_addr (named in the messages); 7 runs without.
#   0. without the option (the behaviour of 71b9a66): c fails every restart
#      and the job fails after --max_restarts, everywhere with c's status.
#   1. exclude_after=2: c is left out after 2 failures (it says why, once),
#      a and b finish as a round of 2, c exits 0 saying the job finished
#      without it; the event logs carry crun.node.excluded on every node.
#   2. --nnodes=3:3: leaving c out would drop below MIN: it is not left out
#      (a line says so) and the job fails as without the option.
#   3. exclude_for=2 and a worker that fails only twice: c sits out, comes
#      back after the cooldown (a running round of 2 re-forms to admit it)
#      and all three finish in a round of 3.
#   4. a bad value of the option is a usage error naming it; the job file's
#      [rendezvous] takes exclude_after and exclude_for.
#   5. the failing node is the store host: it sits out serving the
#      rendezvous, the others finish, it exits 0.
#   6. the node left out is killed while it sits out: the store host does
#      not wait close_timeout for it at the end.
#   7. three agents on one machine without --local_addr (one host name, b and
#      c one address): only c is left out, a and b finish in a round of 2.
. tests/integration/lib.sh

FAST="last_call_timeout=1,join_timeout=30"
EXTRA="" # more agent options
GOOD="$FAKE_WORKER append $T/runs ok sleep 4000 exit 0"
BAD="$FAKE_WORKER append $T/runs bad sleep 200 exit 3"

# agent NAME LOCAL_ADDR NNODES CONF WORKER...: start one agent.
agent() {
	_n=$1 _la=$2 _nn=$3 _conf=$4; shift 4
	"$CRUN" --nnodes="$_nn" --nproc_per_node=1 --max_restarts=3 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id="$JOB" ${_la:+--local_addr="$_la"} \
		--rdzv_conf="$_conf" --event_log="$T/$JOB.$_n.ev" $EXTRA "$@" >"$T/$JOB.$_n.out" 2>&1 &
	eval "pid_$_n=\$!"
	at_exit "kill -KILL \$pid_$_n"
}
# three JOB NNODES CONF CWORKER...: a and b run GOOD, c runs CWORKER.
three() {
	PORT=$(free_port) JOB=$1 _nn=$2 _conf=$3; shift 3
	: >"$T/runs"
	agent a 127.0.0.1 "$_nn" "$_conf" $GOOD
	wait_for 10 listening "$PORT" || { cat "$T/$JOB.a.out" >&2; fail "$JOB: no store host"; }
	agent b 127.0.0.2 "$_nn" "$_conf" $GOOD
	agent c 127.0.0.3 "$_nn" "$_conf" "$@"
}
# status NAME WANT: the agent exits within 60 s with status WANT.
status() {
	eval "_p=\$pid_$1"
	wait_pid 60 "$_p" "$T/$JOB.$1.out"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$JOB".?.out >&2; fail "$JOB: agent $1 exited $_rc, want $2"; }
}
count() { grep -c -e "$1" "$2" || true; }

# 0. Without the option: c's failure ends every round, 4 rounds, then the
#    job fails with c's status on every node.
three base 2:3 "$FAST" $BAD
for n in a b c; do status $n 3; done
expect_eq "base: rounds that c failed" "$(count '^bad' "$T/runs")" 4
expect_eq "base: restarts spent" "$(count 're-forming the group: restart' "$T/base.a.out")" 3
expect_nogrep "base: nobody left out" "left out" "$T/base.c.out"
note "0. without exclude_after: c failed all 4 rounds (3 restarts), job status 3"

# 1. exclude_after=2: c sits out after two failed rounds; a and b finish.
#    While they run round 2, `crun status` and a's /metrics show c left out.
EXTRA="--metrics_port=0 --metrics_addr=127.0.0.1"
three ex 2:3 "$FAST,exclude_after=2" $BAD
EXTRA=""
wait_for 30 grep -q "round 2: group rank" "$T/ex.a.out" || { cat "$T/ex.a.out" >&2; fail "ex: a never ran round 2"; }
"$CRUN" status --rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=ex --json >"$T/ex.status.json" 2>"$T/ex.status.err" ||
	fail "ex: crun status failed: $(cat "$T/ex.status.err")"
"$PYTHON" -c '
import json, sys
x = json.load(open(sys.argv[1]))["excluded"]
assert len(x) == 1 and x[0]["addr"] == "127.0.0.3" and x[0]["failures"] == 2, x
' "$T/ex.status.json" || fail "ex: crun status --json does not show c left out: $(cat "$T/ex.status.json")"
"$CRUN" status --rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=ex >"$T/ex.status.txt" 2>&1
expect_grep "ex: crun status names c" "^left out: .* (127.0.0.3) after 2 failed rounds in a row" "$T/ex.status.txt"
url=$(sed -n 's|.*metrics on \(http://[^ ,]*/metrics\).*|\1|p' "$T/ex.a.out" | head -n 1)
[ -n "$url" ] || fail "ex: a printed no metrics URL"
curl -sf "$url" >"$T/ex.metrics" || fail "ex: cannot scrape $url"
expect_grep "ex: a's metrics count c" "^crun_nodes_excluded 1$" "$T/ex.metrics"
expect_grep "ex: a's metrics name c" '^crun_node_excluded_until_seconds{host=".*",addr="127.0.0.3"} [0-9]' "$T/ex.metrics"
for n in a b; do status $n 0; done
status c 0
expect_eq "ex: rounds that c failed" "$(count '^bad' "$T/runs")" 2
expect_eq "ex: restarts spent" "$(count 're-forming the group: restart' "$T/ex.a.out")" 2
expect_eq "ex: c says why, once" "$(count 'is left out until .*the last 2 failure-ended rounds (to round 1) failed first on it; it waits as a spare' "$T/ex.c.out")" 1
expect_grep "ex: c's exit line" "the job finished without .*, which was left out after repeated failures: all nodes finished; exiting with status 0" "$T/ex.c.out"
for n in a b; do
	expect_grep "ex: $n names c" "(127.0.0.3) is left out of the next rounds" "$T/ex.$n.out"
	expect_grep "ex: $n ran round 2 with 2 nodes" "round 2: group rank . of 2" "$T/ex.$n.out"
	expect_grep "ex: $n succeeded" "1 worker of .* succeeded" "$T/ex.$n.out"
done
expect_nogrep "ex: c ran no worker in round 2" "round 2:" "$T/ex.c.out"
"$PYTHON" - "$T" <<'PY' || fail "ex: event log checks failed (above)"
import json, sys
T = sys.argv[1]
def evs(n):
    return [json.loads(l) for l in open(f"{T}/ex.{n}.ev")]
for n in "abc":
    x = [e for e in evs(n) if e["name"] == "crun.node.excluded"]
    assert len(x) == 1, f"{n}: {len(x)} crun.node.excluded events"
    x = x[0]
    assert x["node_addr"] == "127.0.0.3" and x["since_round"] == 1, x
    assert x["self"] == (n == "c"), x
    assert x["until"] >= int(x["timestamp"]) + 290, x  # exclude_for=300 default
    assert "failed first on it" in x["reason"], x
c = evs("c")
assert c[-1]["name"] == "crun.agent.exited" and c[-1]["status"] == 0, c[-1]
print("   events: crun.node.excluded on a, b and c (self), c exited 0")
PY
note "1. exclude_after=2: c left out after 2 failures, a and b finished in a round of 2, c exited 0"

# 2. --nnodes=3:3: two nodes would remain, below MIN: c is not left out.
three min 3:3 "$FAST,exclude_after=2" $BAD
for n in a b c; do status $n 3; done
expect_eq "min: rounds that c failed" "$(count '^bad' "$T/runs")" 4
expect_grep "min: c says why it stays" "is not left out although the last 2 failure-ended rounds failed first on it: 2 nodes would remain, below the minimum of 3" "$T/min.c.out"
expect_nogrep "min: nobody left out" "left out of the next rounds\|waits as a spare" "$T/min.a.out"
note "2. below MIN: c not left out (one line says so), job failed with status 3"

# 3. exclude_for=2: c's worker fails in generations 0 and 1 only. c sits out
#    for 2 s while a and b run a round of 2, then comes back; the round
#    re-forms with 3 nodes and everyone finishes.
GOOD="$FAKE_WORKER append $T/runs ok sleep 6000 exit 0"
three back 2:3 "$FAST,exclude_after=2,exclude_for=2" \
	"$FAKE_WORKER" append "$T/runs" c fail-if-attempt 0 3 fail-if-attempt 1 3 sleep 500 exit 0
for n in a b c; do status $n 0; done
expect_grep "back: c was left out" "is left out until" "$T/back.c.out"
expect_grep "back: c says it is back" "its cooldown ended: it joins the next round" "$T/back.c.out"
expect_grep "back: the round of 2 re-forms to admit c" "round 2 runs with 2 of at most 3 nodes: asking it to re-form" "$T/back.c.out"
expect_grep "back: c ran in a round of 3" "round 3: group rank . of 3" "$T/back.c.out"
expect_grep "back: a saw c come back" "(127.0.0.3) is back in the rounds" "$T/back.a.out"
expect_grep "back: c's event" '"node_addr":"127.0.0.3".*"name":"crun.node.readmitted"' "$T/back.c.ev"
expect_grep "back: a's event" '"node_addr":"127.0.0.3".*"name":"crun.node.readmitted"' "$T/back.a.ev"
expect_eq "back: c's worker ran 3 times (2 failures, 1 success)" "$(count '^c ' "$T/runs")" 3
note "3. exclude_for=2: c came back after the cooldown, all three finished in round 3"

# 4. Usage errors name the option.
"$CRUN" --nnodes=2:3 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:1 \
	--rdzv_conf=exclude_after=99 true >"$T/bad.out" 2>&1
expect_eq "exclude_after=99: usage error" "$?" 2
expect_grep "exclude_after=99 named" "'99' for 'exclude_after' is not a count in 0..32" "$T/bad.out"
"$CRUN" --nnodes=2:3 --rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:1 \
	--rdzv_conf=exclude_after=2,exclude_for=-1 true >"$T/bad.out" 2>&1
expect_eq "exclude_for=-1: usage error" "$?" 2
expect_grep "exclude_for=-1 named" "'-1' for 'exclude_for'" "$T/bad.out"
# The job file's [rendezvous] takes them as keys too.
printf '[job]\nentrypoint = /bin/true\nnnodes = 2:3\n[rendezvous]\nbackend = c10d\nendpoint = 127.0.0.1:1\nexclude_after = 2\nexclude_for = 30\n' >"$T/job.ini"
"$CRUN" --print-config "$T/job.ini" >"$T/pc.out" 2>&1 || { cat "$T/pc.out" >&2; fail "print-config of the job file failed"; }
expect_grep "job file keys" "rdzv_conf *= exclude_after=2,exclude_for=30" "$T/pc.out"
note "4. bad values: exit 2 naming the key; [rendezvous] exclude_after/exclude_for read"

# 5. The failing node is the store host: it sits out yet serves the
#    rendezvous; b becomes group rank 0 and hosts the workers' store.
PORT=$(free_port) JOB=host
GOOD="$FAKE_WORKER append $T/runs ok sleep 4000 exit 0"
: >"$T/runs"
agent a 127.0.0.1 2:3 "$FAST,exclude_after=2" $BAD
wait_for 10 listening "$PORT" || { cat "$T/host.a.out" >&2; fail "host: no store host"; }
agent b 127.0.0.2 2:3 "$FAST,exclude_after=2" $GOOD
agent c 127.0.0.3 2:3 "$FAST,exclude_after=2" $GOOD
for n in b c a; do status $n 0; done
expect_eq "host: rounds that a failed" "$(count '^bad' "$T/runs")" 2
expect_grep "host: a says why" "is left out until .*waits as a spare" "$T/host.a.out"
expect_grep "host: a's exit line" "the job finished without .*exiting with status 0" "$T/host.a.out"
expect_grep "host: b is group rank 0 of 2" "round 2: group rank 0 of 2, .*store 127.0.0.2:" "$T/host.b.out"
note "5. the store host left out: it served the rendezvous, b and c finished, a exited 0"

# 6. The node left out is killed while it sits out: the store host notices
#    its watch vanish and does not wait close_timeout (30 s) for it to read
#    how the job ended.
PORT=$(free_port) JOB=gone
: >"$T/runs"
agent a 127.0.0.1 2:3 "$FAST,close_timeout=30,exclude_after=2" $GOOD
wait_for 10 listening "$PORT" || { cat "$T/gone.a.out" >&2; fail "gone: no store host"; }
agent b 127.0.0.2 2:3 "$FAST,close_timeout=30,exclude_after=2" $GOOD
agent c 127.0.0.3 2:3 "$FAST,close_timeout=30,exclude_after=2" $BAD
wait_for 30 grep -q "waits as a spare" "$T/gone.c.out" || { cat "$T"/gone.?.out >&2; fail "gone: c never sat out"; }
kill -KILL $pid_c
status b 0
t_b=$(now_ms)
status a 0
ms=$(( $(now_ms) - t_b ))
[ "$ms" -le 10000 ] || fail "gone: the store host left $ms ms after b, waiting for the killed node (want <= 10000)"
note "6. a node left out killed meanwhile: the store host left $ms ms after the others"

# 7. Several agents per machine are normal: without --local_addr b and c
#    announce the same host name and address. Only c, whose worker fails,
#    may be left out: b must not take c's exclusion for its own.
PORT=$(free_port) JOB=same
: >"$T/runs"
agent a "" 2:3 "$FAST,exclude_after=2" $GOOD
wait_for 10 listening "$PORT" || { cat "$T/same.a.out" >&2; fail "same: no store host"; }
agent b "" 2:3 "$FAST,exclude_after=2" $GOOD
agent c "" 2:3 "$FAST,exclude_after=2" $BAD
for n in a b c; do status $n 0; done
expect_eq "same: rounds that c failed" "$(count '^bad' "$T/runs")" 2
expect_grep "same: c says why" "is left out until .*waits as a spare" "$T/same.c.out"
expect_nogrep "same: b is not left out" "waits as a spare" "$T/same.b.out"
for n in a b; do
	expect_grep "same: $n ran round 2 with 2 nodes" "round 2: group rank . of 2" "$T/same.$n.out"
done
note "7. three agents on one machine: only c left out, a and b finished in a round of 2"
exit 0
