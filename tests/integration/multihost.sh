#!/bin/sh
# needs: torch
# Multi-node across hosts: each host is a Linux network namespace with its own
# address, hostname and loopback (lib_netns.sh), joined by a bridge. The
# multinode.sh scenarios again, now with real addresses and name resolution,
# plus what loopback cannot do: cutting a node's cable. Needs root.
#   1. 3 hosts, 4+2+1 workers: ranks, sizes, MASTER_ADDR names the store host
#      and the workers' store is reachable from every host.
#   2. kill -9 of a non-host machine (--nnodes=2:3): the others re-form.
#   3. kill of the store host: every other agent exits non-zero, promptly.
#   4. a cut link (--nnodes=2:3): the others re-form without the node; the
#      cut node's agent exits on its own ("lost the store"); plugging the
#      cable back in leaves nothing hanging.
#   5. a worker failure on one host restarts every host, one generation.
#   6. real PyTorch gloo DDP on 2 hosts with 2+1 workers (agent store).
#   7. a cut link on the store host: everyone exits non-zero, bounded.
# Every wait is bounded; detection times are measured and printed.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh

netns_setup 3
export PYTHON

FAST="--rdzv_conf=last_call_timeout=1,join_timeout=20"
DETECT=5   # s: bound on noticing a lost node (the target is 2 s; the time is printed)
now_ms() { date +%s%3N; }
lines() { [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ]; }
v() { sed -n "s/^$1=//p" "$2"; }

# agent NAME HOST NPROC NNODES [crun flags and worker...]: start crun on HOST
# in the background (log $T/NAME.out, pid in $pid_NAME), endpoint h1:$PORT.
agent() {
	_name=$1 _h=$2 _np=$3 _nn=$4; shift 4
	netns_spawn "$_h" "$T/$_name.out" "$CRUN" --nnodes="$_nn" --nproc_per_node="$_np" \
		--rdzv_backend=c10d --rdzv_endpoint="h1:$PORT" --rdzv_id="$JOB" "$@"
	eval "pid_$_name=\$NETNS_PID"
}
# exited PID: the child is gone or a zombie (kill -0 succeeds on a zombie).
agent_exited() { eval "exited \$pid_$1"; }
all_exited() { for _a; do agent_exited "$_a" || return 1; done; }
# expect_status NAME WANT [SECONDS]: the agent exits within SECONDS (default
# 20) with status WANT.
expect_status() {
	wait_for "${3:-20}" agent_exited "$1" || { tail -n 20 "$T/$1.out" >&2; fail "agent $1 still running after ${3:-20} s"; }
	eval "wait \$pid_$1"; _rc=$?
	[ "$_rc" = "$2" ] || { cat "$T/$1.out" >&2; fail "agent $1 exited $_rc, want $2"; }
}
# expect_failed NAME [SECONDS]: exits non-zero within SECONDS.
expect_failed() {
	wait_for "${2:-20}" agent_exited "$1" || { tail -n 20 "$T/$1.out" >&2; fail "agent $1 still running after ${2:-20} s"; }
	eval "wait \$pid_$1"; _rc=$?
	[ "$_rc" != 0 ] || { cat "$T/$1.out" >&2; fail "agent $1 exited 0, want a failure"; }
}
listening_in() { ip netns exec "$(netns_ns "$1")" ss -Hltn "sport = :$2" 2>/dev/null | grep -q .; }
host_idle() { [ -z "$(ip netns pids "$(netns_ns "$1")" 2>/dev/null)" ]; }
all_idle() { for _h in h1 h2 h3; do host_idle $_h || return 1; done; }
# Nothing may be left running on any host between scenarios (stray workers,
# agents stuck on a dead peer).
expect_idle() {
	wait_for 5 all_idle || {
		for _h in h1 h2 h3; do
			for _p in $(ip netns pids "$(netns_ns $_h)"); do
				echo "left on $_h: $(tr '\0' ' ' </proc/$_p/cmdline 2>/dev/null)" >&2
			done
		done
		fail "$1: processes left running"
	}
}
elapsed() { echo "$(( $(now_ms) - $1 )) ms"; }
# soft CHECK...: run an expect_* check, note a failure and go on (so one wrong
# value does not hide the others); soft_done fails if any did not hold.
SOFT=0
soft() { ( "$@" ) || SOFT=$((SOFT+1)); }
soft_done() { [ "$SOFT" = 0 ] || fail "$1: $SOFT check(s) failed (see above)"; }

# ---------------------------------------------------------------------------
# 1. Three hosts with 4, 2 and 1 workers. The worker dumps its environment and
#    connects to MASTER_ADDR:MASTER_PORT from its own host.
cat >"$T/envprobe.py" <<'EOF'
import os, socket, sys
out = "%s.%s" % (sys.argv[1], os.environ["LOCAL_RANK"])
try:
    socket.create_connection((os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])),
                             timeout=5).close()
    ok = "yes"
except Exception as e:
    ok = "no (%r)" % (e,)
with open(out + ".tmp", "w") as f:
    for k in sorted(os.environ):
        f.write("%s=%s\n" % (k, os.environ[k]))
    f.write("MASTER_REACHABLE=%s\nHOSTNAME_SEEN=%s\n" % (ok, socket.gethostname()))
os.rename(out + ".tmp", out)
EOF
scenario1() {
	note "1. 3 hosts, 4+2+1 workers"
	PORT=29401 JOB=hetero
	t0=$(now_ms)
	agent a h1 4 3 $FAST "$T/envprobe.py" "$T/e_h1"
	wait_for 10 listening_in h1 $PORT || { cat "$T/a.out" >&2; fail "h1 never served the store on :$PORT"; }
	agent b h2 2 3 $FAST "$T/envprobe.py" "$T/e_h2"
	agent c h3 1 3 $FAST "$T/envprobe.py" "$T/e_h3"
	for x in a b c; do expect_status $x 0; done
	note "   formed and finished in $(elapsed "$t0")"
	H1=$(netns_addr h1)
	soft expect_eq "every rank once" "$(cat "$T"/e_h* | sed -n 's/^RANK=//p' | sort -n | tr '\n' ' ')" "0 1 2 3 4 5 6 "
	soft expect_eq "world size" "$(cat "$T"/e_h* | sed -n 's/^WORLD_SIZE=//p' | sort -u)" 7
	soft expect_eq "group world size" "$(cat "$T"/e_h* | sed -n 's/^GROUP_WORLD_SIZE=//p' | sort -u)" 3
	soft expect_eq "one role for all: role world size" "$(cat "$T"/e_h* | sed -n 's/^ROLE_WORLD_SIZE=//p' | sort -u)" 7
	soft expect_eq "agent store" "$(cat "$T"/e_h* | sed -n 's/^TORCHELASTIC_USE_AGENT_STORE=//p' | sort -u)" True
	soft expect_eq "one MASTER_ADDR" "$(cat "$T"/e_h* | sed -n 's/^MASTER_ADDR=//p' | sort -u | wc -l)" 1
	soft expect_eq "one MASTER_PORT" "$(cat "$T"/e_h* | sed -n 's/^MASTER_PORT=//p' | sort -u | wc -l)" 1
	maddr=$(v MASTER_ADDR "$T/e_h3.0") mport=$(v MASTER_PORT "$T/e_h3.0")
	case "$maddr" in h1|"$H1") ;; *) soft fail "MASTER_ADDR is '$maddr', want h1 or $H1 (the store host)" ;; esac
	[ "$mport" -ge 1 ] 2>/dev/null && [ "$mport" -le 65535 ] || soft fail "MASTER_PORT '$mport' is not a TCP port"
	for h in h2 h3; do
		soft expect_eq "$h resolves MASTER_ADDR to h1" "$(netns_exec $h getent ahostsv4 "$maddr" | awk 'NR==1{print $1}')" "$H1"
	done
	for f in "$T"/e_h*.[0-9]; do
		soft expect_eq "workers' store reachable from $(v HOSTNAME_SEEN "$f") ($f)" "$(v MASTER_REACHABLE "$f")" yes
		soft expect_eq "ROLE_RANK = RANK ($f)" "$(v ROLE_RANK "$f")" "$(v RANK "$f")"
	done
	# Group ranks: the store host h1 first, then h2, h3 (ordered by host name);
	# RANK = prefix sum of the local world sizes + LOCAL_RANK.
	for spec in "h1 0 4 0" "h2 1 2 4" "h3 2 1 6"; do
		set -- $spec
		for f in "$T/e_$1".[0-9]; do
			soft expect_eq "$1 hostname" "$(v HOSTNAME_SEEN "$f")" "$1"
			soft expect_eq "$1 group rank" "$(v GROUP_RANK "$f")" "$2"
			soft expect_eq "$1 local world size" "$(v LOCAL_WORLD_SIZE "$f")" "$3"
			soft expect_eq "$1 rank of $f" "$(v RANK "$f")" $(( $4 + $(v LOCAL_RANK "$f") ))
		done
	done
	soft_done "scenario 1"
	expect_idle "scenario 1"
}

# ---------------------------------------------------------------------------
# 2. kill -9 of a whole non-host machine (agent and workers) while a round
#    runs, MIN still met: h1 and h2 re-form as round 1 and finish.
scenario2() {
	note "2. kill -9 of h3 (not the store host), --nnodes=2:3"
	PORT=29402 JOB=killnode
	W="$FAKE_WORKER append $T/runs2 run hang-if-attempt 0"
	agent a h1 2 2:3 $FAST $W
	wait_for 10 listening_in h1 $PORT || { cat "$T/a.out" >&2; fail "h1 never served the store"; }
	agent b h2 1 2:3 $FAST $W
	agent c h3 1 2:3 $FAST $W
	wait_for 15 lines "$T/runs2" 4 || { cat "$T"/[abc].out >&2; fail "round 0 never ran on all 3 hosts"; }
	t0=$(now_ms)
	netns_kill h3 KILL
	wait_for $DETECT sh -c "grep -q 're-forming' '$T/a.out' && grep -q 're-forming' '$T/b.out'" ||
		{ cat "$T/a.out" "$T/b.out" >&2; fail "survivors did not re-form within $DETECT s of h3's death"; }
	note "   survivors re-forming $(elapsed "$t0") after the kill"
	expect_status a 0
	expect_status b 0
	note "   survivors finished $(elapsed "$t0") after the kill"
	expect_status c 137
	expect_eq "round 1 without h3: ranks 0-2" "$(grep ' 1$' "$T/runs2" | sort | tr '\n' ' ')" "run 0 1 run 1 1 run 2 1 "
	cat "$T/a.out" "$T/b.out" >"$T/ab2.out"
	note "   survivors: $(grep -m1 'round 0 ended' "$T/ab2.out")"
	soft expect_grep "the loss names h3 exactly" "round 0 ended: h3 (" "$T/ab2.out"
	expect_grep "new round of 2 nodes" "round 1: group rank 0 of 2" "$T/a.out"
	expect_grep "no restart spent" "no restart is spent" "$T/ab2.out"
	expect_idle "scenario 2"
	soft_done "scenario 2"
}

# ---------------------------------------------------------------------------
# 3. kill of the store host: h2 and h3 (MIN=2 would still be met) cannot go
#    on without the store; both must exit non-zero with a clear error, fast.
scenario3() {
	note "3. kill -9 of the store host h1"
	PORT=29403 JOB=killhost
	W="$FAKE_WORKER append $T/runs3 run hang"
	agent a h1 1 2:3 $FAST $W
	wait_for 10 listening_in h1 $PORT || { cat "$T/a.out" >&2; fail "h1 never served the store"; }
	agent b h2 1 2:3 $FAST $W
	agent c h3 1 2:3 $FAST $W
	wait_for 15 lines "$T/runs3" 3 || { cat "$T"/[abc].out >&2; fail "round 0 never ran on all 3 hosts"; }
	t0=$(now_ms)
	netns_kill h1 KILL
	wait_for $DETECT all_exited b c || { cat "$T/b.out" "$T/c.out" >&2; fail "h2/h3 still running $DETECT s after the store host died"; }
	note "   h2 and h3 exited $(elapsed "$t0") after the store host died"
	expect_status a 137
	expect_failed b
	expect_failed c
	for x in b c; do
		expect_grep "agent $x names the lost store" "lost the rendezvous store" "$T/$x.out"
	done
	note "   h2: $(tail -n 1 "$T/b.out")"
	expect_idle "scenario 3"
}

# ---------------------------------------------------------------------------
# 4. Cut h3's cable while a round runs (--nnodes=2:3). No FIN, no RST: only
#    heartbeats can tell. h1 and h2 must drop h3 and re-form as round 1; h3's
#    agent must notice on its own that the store stopped answering, stop its
#    worker and exit non-zero. Then plug it back in: nothing may hang.
scenario4() {
	note "4. cut h3's link, --nnodes=2:3"
	PORT=29404 JOB=cutlink
	W="$FAKE_WORKER append $T/runs4 run hang-if-attempt 0"
	agent a h1 2 2:3 $FAST $W
	wait_for 10 listening_in h1 $PORT || { cat "$T/a.out" >&2; fail "h1 never served the store"; }
	agent b h2 1 2:3 $FAST $W
	agent c h3 1 2:3 $FAST $W
	wait_for 15 lines "$T/runs4" 4 || { cat "$T"/[abc].out >&2; fail "round 0 never ran on all 3 hosts"; }
	t0=$(now_ms)
	netns_link_down h3
	cut_ok=1
	wait_for $DETECT sh -c "grep -q 're-forming' '$T/a.out' && grep -q 're-forming' '$T/b.out'" ||
		{ cut_ok=0; cat "$T/a.out" "$T/b.out" >&2; echo "FAIL: survivors did not re-form within $DETECT s of cutting h3" >&2; }
	[ $cut_ok = 1 ] && note "   survivors re-forming $(elapsed "$t0") after the cut"
	if wait_for $DETECT agent_exited c; then
		note "   h3's agent exited $(elapsed "$t0") after the cut"
	else
		cut_ok=0
		cat "$T/c.out" >&2
		echo "FAIL: h3's agent still running $DETECT s after its link was cut" >&2
	fi
	# Plug the cable back in before failing, so a stale h3 shows what it does.
	netns_link_up h3
	[ $cut_ok = 1 ] || fail "cut link not handled (see above)"
	expect_status a 0
	expect_status b 0
	expect_failed c 10
	expect_grep "h3 says it lost the store" "no reply from the rendezvous store\|lost the rendezvous store" "$T/c.out"
	expect_eq "round 1 without h3: ranks 0-2" "$(grep ' 1$' "$T/runs4" | sort | tr '\n' ' ')" "run 0 1 run 1 1 run 2 1 "
	cat "$T/a.out" "$T/b.out" >"$T/ab4.out"
	note "   survivors: $(grep -m1 'round 0 ended' "$T/ab4.out")"
	soft expect_grep "the loss names h3 exactly" "round 0 ended: h3 (" "$T/ab4.out"
	expect_grep "new round of 2 nodes" "round 1: group rank 0 of 2" "$T/a.out"
	expect_nogrep "h3 never joins round 1" "round 1" "$T/c.out"
	expect_idle "scenario 4 (after link up)"
	soft_done "scenario 4"
}

# ---------------------------------------------------------------------------
# 5. A worker failure on h2 restarts h1, h2 and h3 with one generation.
scenario5() {
	note "5. worker failure on h2 restarts all hosts"
	PORT=29405 JOB=restart
	# 1+2+1 workers: h2 has ranks 1-2; rank 2 fails on attempt 0.
	W="$FAKE_WORKER append $T/runs5 run fail-if 2 0 5 hang-if-attempt 0"
	t0=$(now_ms)
	agent a h1 1 3 --max_restarts=1 $FAST $W
	wait_for 10 listening_in h1 $PORT || { cat "$T/a.out" >&2; fail "h1 never served the store"; }
	agent b h2 2 3 --max_restarts=1 $FAST $W
	agent c h3 1 3 --max_restarts=1 $FAST $W
	for x in a b c; do expect_status $x 0; done
	note "   failure, job-wide restart and success in $(elapsed "$t0")"
	expect_eq "every rank ran generation 1" "$(grep ' 1$' "$T/runs5" | sort | tr '\n' ' ')" "run 0 1 run 1 1 run 2 1 run 3 1 "
	expect_eq "no generation 2" "$(grep -c ' 2$' "$T/runs5")" 0
	for x in a b c; do
		expect_grep "agent $x restarted once, job-wide" "restart 1 of 1 after a worker failure" "$T/$x.out"
		expect_grep "agent $x ran round 1" "round 1: group rank" "$T/$x.out"
	done
	expect_grep "h1 heard of h2's failure" "a worker failed on another node" "$T/a.out"
	expect_grep "h3 heard of h2's failure" "a worker failed on another node" "$T/c.out"
	expect_idle "scenario 5"
}

# ---------------------------------------------------------------------------
# 6. Real PyTorch: gloo + DDP on h1 (2 workers) and h2 (1), agent store.
scenario6() {
	"$PYTHON" -c 'import torch.distributed' 2>/dev/null ||
		fail "6. no PyTorch in $PYTHON: the DDP scenario cannot run"
	note "6. PyTorch gloo DDP, h1 x2 + h2 x1, then a restart (new_group, object collectives)"
	PORT=29406 JOB=ddp
	mkdir "$T/ddp"
	t0=$(now_ms)
	agent a h1 2 2 $FAST tests/integration/py/ddp_gloo.py --out "$T/ddp"
	agent b h2 1 2 $FAST tests/integration/py/ddp_gloo.py --out "$T/ddp"
	expect_status a 0 60
	expect_status b 0 60
	note "   DDP run took $(elapsed "$t0")"
	for r in 0 1 2; do
		expect_grep "rank $r result" "^rank $r/3 attempt 0 sum 6 want 6 replicas_equal True store True new_group ok objects ok store_server none$" "$T/ddp/rank.$r"
	done
	# Each node's local rank 0 fails on attempt 0: the job restarts once and
	# forms a fresh process group through a fresh agent store.
	JOB=ddp2
	rm -f "$T"/ddp/rank.*
	agent a h1 2 2 $FAST --max_restarts=1 tests/integration/py/ddp_gloo.py --out "$T/ddp" --fail-on-attempt 0
	agent b h2 1 2 $FAST --max_restarts=1 tests/integration/py/ddp_gloo.py --out "$T/ddp" --fail-on-attempt 0
	expect_status a 0 90
	expect_status b 0 90
	for r in 0 1 2; do
		expect_grep "rank $r after the restart" "^rank $r/3 attempt 1 sum 6 want 6 replicas_equal True store True new_group ok objects ok store_server none$" "$T/ddp/rank.$r"
	done
	expect_idle "scenario 6"
}

# ---------------------------------------------------------------------------
# 7. Cut the store host's cable (--nnodes=2:3, join_timeout=3). h2 and h3 get
#    no heartbeat replies: each exits non-zero on its own ("lost the store").
#    h1 sees its successor stop answering, re-forms, finds fewer than MIN and
#    gives up after join_timeout with a message naming who was missing.
scenario7() {
	note "7. cut the store host h1's link, --nnodes=2:3"
	PORT=29407 JOB=cuthost
	W="$FAKE_WORKER append $T/runs7 run hang-if-attempt 0"
	J="--rdzv_conf=last_call_timeout=1,join_timeout=3"
	agent a h1 1 2:3 $J $W
	wait_for 10 listening_in h1 $PORT || { cat "$T/a.out" >&2; fail "h1 never served the store"; }
	agent b h2 1 2:3 $J $W
	agent c h3 1 2:3 $J $W
	wait_for 15 lines "$T/runs7" 3 || { cat "$T"/[abc].out >&2; fail "round 0 never ran on all 3 hosts"; }
	t0=$(now_ms)
	netns_link_down h1
	if wait_for $DETECT all_exited b c; then
		note "   h2 and h3 exited $(elapsed "$t0") after the cut"
		ok=1
	else
		ok=0
		cat "$T/b.out" "$T/c.out" >&2
		echo "FAIL: h2/h3 still running $DETECT s after the store host's link was cut" >&2
	fi
	if wait_for $((3 + DETECT)) agent_exited a; then
		note "   h1 gave up $(elapsed "$t0") after the cut"
	else
		ok=0
		cat "$T/a.out" >&2
		echo "FAIL: h1 still running $((3 + DETECT)) s after its link was cut" >&2
	fi
	netns_link_up h1
	[ $ok = 1 ] || fail "cut store host not handled (see above)"
	expect_failed a
	expect_failed b
	expect_failed c
	for x in b c; do
		expect_grep "agent $x says it lost the store" "no reply from the rendezvous store\|lost the rendezvous store" "$T/$x.out"
	done
	note "   h1: $(grep -m1 'round 0 ended' "$T/a.out")"
	soft expect_grep "h1 names its lost successor exactly" "round 0 ended: h2 (" "$T/a.out"
	expect_grep "h1's timeout names the missing" "timed out .* still missing" "$T/a.out"
	expect_idle "scenario 7 (after link up)"
	soft_done "scenario 7"
}

# Each scenario runs in a subshell: a failed one is reported, its processes
# are killed, and the others still run (the lead sees every broken scenario).
FAILED=""
for i in 1 2 3 4 5 6 7; do
	( "scenario$i" ) || { FAILED="$FAILED $i"; netns_kill_all 1; }
done
[ -z "$FAILED" ] || fail "scenario(s)$FAILED failed"
exit 0
