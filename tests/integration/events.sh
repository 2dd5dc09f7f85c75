#!/bin/sh
# The event log: three agents (--nnodes=2:3, one worker each,
# --max_restarts=1) on loopback. Rank 2 fails in generation 0 (a restart),
# everyone waits in generation 1 until the test kills rank 2's agent (a node
# loss: the two others re-form without spending a restart) and generation 2
# succeeds. Each agent's --event_log is read with a JSON parser: every line a
# whole object with the common fields, and the sequence of a survivor and of
# the failed node is what happened, in order.
. tests/integration/lib.sh

PORT=$(free_port)
W="$FAKE_WORKER pid $T/pids fail-if 2 0 3 hang-if-attempt 1 sleep 1500 exit 0"
agent() { # NAME
	"$CRUN" --nnodes=2:3 --nproc_per_node=1 --max_restarts=1 --rdzv_backend=c10d \
		--rdzv_endpoint=127.0.0.1:$PORT --rdzv_id=ev$$ \
		--rdzv_conf=last_call_timeout=0.5,join_timeout=30 --event_log="$T/ev.$1" \
		$W >"$T/$1.out" 2>&1 &
	eval "pid_$1=\$!"
}
agent a
wait_for 10 listening "$PORT" || fail "no store host"
agent b
wait_for 10 sh -c "grep -qs crun.agent.started '$T/ev.b'" || fail "b never started"
agent c
# Generation 1: three workers hang; the third is c's (rank 2, by pid order).
wait_for 30 sh -c "[ \$(cat '$T/ev.c' 2>/dev/null | grep -c crun.worker.started) -ge 2 ]" ||
	{ cat "$T"/*.out; fail "generation 1 never started on c"; }
kill -9 $pid_c
for n in a b; do
	eval "p=\$pid_$n"
	wait_for 60 sh -c "! kill -0 $p 2>/dev/null" || fail "agent $n hung"
	wait $p || { cat "$T/$n.out"; fail "agent $n exited non-zero"; }
done
wait $pid_c 2>/dev/null

"$PYTHON" - "$T" <<'PY' || fail "event log checks failed (above)"
import json, sys
T = sys.argv[1]
def load(n):
    evs = []
    for i, line in enumerate(open(f"{T}/ev.{n}")):
        e = json.loads(line)  # every line one whole object
        for k in ("name", "timestamp", "host", "run_id", "round", "generation"):
            assert k in e, f"{n}:{i + 1}: no {k}: {line}"
        evs.append(e)
    ts = [e["timestamp"] for e in evs]
    assert ts == sorted(ts), f"{n}: timestamps go back"
    return evs
def subsequence(evs, want, who):
    names = [e["name"] for e in evs]
    i = 0
    for w in want:
        while i < len(names) and names[i] != w[0]:
            i += 1
        assert i < len(names), f"{who}: no {w} after position {i} in {names}"
        e = evs[i]
        for k, v in w[1].items():
            assert e.get(k) == v, f"{who}: {w[0]}: {k}={e.get(k)!r}, want {v!r}"
        i += 1
a, c = load("a"), load("c")
subsequence(a, [
    ("crun.agent.started", {"nnodes_min": 2, "nnodes_max": 3}),
    ("crun.rdzv.closed", {"generation": 0, "group_rank": 0, "group_world_size": 3}),
    ("crun.worker.started", {"generation": 0}),
    ("crun.rdzv.ended", {"kind": "failure"}),
    ("crun.group.stopping", {"reason": "round ended elsewhere"}),
    ("crun.group.restarting", {"after": "failure", "restarts_used": 1}),
    ("crun.rdzv.closed", {"generation": 1, "group_world_size": 3}),
    ("crun.node.lost", {}),
    ("crun.group.restarting", {"after": "membership", "restarts_used": 1}),
    ("crun.rdzv.closed", {"generation": 2, "group_world_size": 2}),
    ("torchelastic.worker.status.SUCCEEDED", {"generation": 2, "exitcode": 0}),
    ("crun.agent.exited", {"status": 0}),
], "survivor a")
subsequence(c, [
    ("crun.rdzv.closed", {"generation": 0, "group_rank": 2}),
    ("torchelastic.worker.status.FAILED", {"rank": 2, "exitcode": 3, "generation": 0}),
    ("crun.group.stopping", {"reason": "worker failed"}),
    ("crun.group.restarting", {"after": "failure"}),
    ("crun.rdzv.closed", {"generation": 1}),
], "failed node c")
assert len({e["run_id"] for e in a if e["round"] is not None}) == 1, "one run id"
print("   event log: %d events on a, %d on c" % (len(a), len(c)))
PY
exit 0
