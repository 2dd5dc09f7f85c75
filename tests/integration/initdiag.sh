#!/bin/sh
# needs: torch
# A stuck process-group init, named (--init_warn_after, agent/initdiag.c).
# Two hosts as network namespaces, a real PyTorch gloo job (env://), the
# agent hosting the workers' store on h1 at a pinned port. Needs root.
#   1. h2 drops its own traffic to the workers' store port (an nftables rule
#      inside h2; the rendezvous port still passes): h1 prints, 2 s and again
#      4 s after the first rank reached the store, one line naming h2's ranks
#      1-2 and the store's address and port; the event log has the same
#      (exact ranks, node, store, doubling interval). The rule goes: h1 says
#      once that all 3 ranks connected, and the job succeeds.
#      (CRUN_INIT_WARN_AFTER=2, so a crun without the feature runs the same
#      scenario and fails on the missing line rather than on an option.)
#   2. a healthy run (1+1 workers) with --init_warn_after=3 whose workers
#      hold the group past that time: no warning, no "all ranks connected"
#      line.
# Every wait is bounded; the times are printed.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh

need_root "network namespaces and nftables"
command -v nft >/dev/null 2>&1 || skip "needs nftables (nft)"
need_torch
netns_setup 2
export PYTHON

SPORT=23457 # the workers' store (below 32768: chosen in advance)
FAST="--rdzv_conf=last_call_timeout=1,join_timeout=30,store_port=$SPORT"
JOB=py/initdiag_gloo.py
elapsed() { echo "$(( $(now_ms) - $1 )) ms"; }

# agent NAME HOST NPROC [flags...]: crun on HOST in the background.
agent() {
	_name=$1 _h=$2 _np=$3; shift 3
	netns_spawn "$_h" "$T/$_name.out" "$CRUN" --nnodes=2 --nproc_per_node="$_np" \
		--rdzv_backend=c10d --rdzv_endpoint="h1:29400" --rdzv_id="$RUN" $FAST "$@"
	eval "pid_$_name=\$NETNS_PID"
}
expect_status() { # NAME WANT SECONDS
	eval "_p=\$pid_$1"
	wait_for "$3" exited "$_p" || { tail -n 20 "$T/$1.out" >&2; fail "agent $1 still running after $3 s"; }
	wait "$_p"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$1.out" >&2; fail "agent $1 exited $_rc, want $2"; }
}
block() { ip netns exec "$(netns_ns h2)" nft -f - <<NFT
table inet initdiag {
	chain out {
		type filter hook output priority 0;
		tcp dport $SPORT drop
	}
}
NFT
}
unblock() { ip netns exec "$(netns_ns h2)" nft delete table inet initdiag; }
MSG1="^crun: ranks 1-2 on h2 have not connected to the workers' store at h1:$SPORT after [0-9][0-9]* s"
HINT="check that h2 can reach h1 on port $SPORT"

# ---------------------------------------------------------------------------
note "1. h2 cannot reach the workers' store port"
RUN=blocked
mkdir "$T/o1"
block || fail "cannot add the nftables rule in h2"
at_exit unblock
t0=$(now_ms)
CRUN_INIT_WARN_AFTER=2 agent a h1 1 --event_log="$T/ev1.jsonl" "tests/integration/$JOB" --out "$T/o1" --hold 1
CRUN_INIT_WARN_AFTER=2 agent b h2 2 "tests/integration/$JOB" --out "$T/o1" --hold 1
# Bounded generously: importing torch takes seconds, more on a busy machine.
wait_for 45 grep -q "have not connected" "$T/a.out" || {
	cat "$T/a.out" "$T/b.out" >&2; fail "no line naming the missing ranks within 45 s"; }
note "   first warning after $(elapsed "$t0"): $(grep -m1 'have not connected' "$T/a.out")"
expect_grep "the line names h2's ranks, the store and the time" "$MSG1" "$T/a.out"
expect_grep "the line says what to check" "$HINT" "$T/a.out"
expect_grep "the line says the connection attempts go unanswered" "(their connection attempts get no answer)" "$T/a.out"
expect_nogrep "no rank of h1 is named" "ranks* 0[ ,-].* not connected" "$T/a.out"
twice() { [ "$(grep -c 'have not connected' "$T/a.out")" -ge 2 ]; }
wait_for 10 twice || { cat "$T/a.out" >&2; fail "no repeated warning within 10 s"; }
expect_eq "one line per check while blocked" "$(grep -c 'have not connected' "$T/a.out")" 2
expect_eq "the repeated line names the same ranks" "$(grep -c "$MSG1" "$T/a.out")" 2
t1=$(now_ms)
unblock || fail "cannot remove the nftables rule"
wait_for 30 grep -q "all 3 ranks connected to the workers' store after" "$T/a.out" ||
	{ cat "$T/a.out" "$T/b.out" >&2; fail "no 'all ranks connected' line within 30 s of the rule's removal"; }
note "   $(grep -m1 'all 3 ranks connected' "$T/a.out" | sed 's/^crun: //') ($(elapsed "$t1") after the rule went)"
expect_status a 0 40
expect_status b 0 20
for r in 0 1 2; do expect_grep "rank $r's result" "^rank $r/3 sum 6 want 6" "$T/o1/rank.$r"; done
expect_eq "the 'all connected' line is said once" "$(grep -c 'ranks connected to the workers' "$T/a.out")" 1
expect_nogrep "h2 itself repeats nothing" "have not connected" "$T/b.out"
"$PYTHON" - "$T/ev1.jsonl" "$SPORT" <<'PY' || fail "init_diagnosis events (see above)"
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
d = [e for e in ev if e["name"] == "crun.init_diagnosis"]
miss = [e for e in d if e["state"] == "missing"]
done = [e for e in d if e["state"] == "connected"]
assert len(miss) == 2, miss
for e in miss:
    assert (e["node"], e["ranks"], e["missing"], e["store_addr"], e["store_port"]) == \
        ("h2", "1-2", 2, "h1", int(sys.argv[2])), e
    assert e["trying"] is True and e["host"] == "h1", e
    # The store host's own view agrees: no connection from h2's address.
    assert e["store_conns_from_node"] == 0, e
# Checks 2 s, then 4 s, after the first rank reached the store (one tick of
# jitter, 0.5 s at --init_warn_after=2, plus load).
s = [e["since_first_connection"] for e in miss]
assert 2 <= s[0] < 3.5 and 4 <= s[1] < 5.5, s
assert miss[0]["after"] < miss[1]["after"], miss
assert len(done) == 1 and done[0]["world_size"] == 3, done
assert d[-1] is done[0]
print("   events: %d missing (%s), then connected after %.1f s"
      % (len(miss), ", ".join("%.1f s" % e["after"] for e in miss), done[0]["after"]))
PY
note "   scenario 1 took $(elapsed "$t0")"

# ---------------------------------------------------------------------------
note "2. a healthy run: nothing said"
RUN=healthy
mkdir "$T/o2"
t0=$(now_ms)
agent c h1 1 --init_warn_after=3 "tests/integration/$JOB" --out "$T/o2" --hold 4
agent d h2 1 --init_warn_after=3 "tests/integration/$JOB" --out "$T/o2" --hold 4
expect_status c 0 40
expect_status d 0 20
for r in 0 1; do expect_grep "rank $r's result" "^rank $r/2 sum 3 want 3" "$T/o2/rank.$r"; done
for x in c d; do
	expect_nogrep "no warning on a healthy run ($x)" "have not connected\|ranks connected to the workers" "$T/$x.out"
done
note "   scenario 2 took $(elapsed "$t0")"
exit 0
