#!/bin/sh
# etcd failover: a 3-member cluster on loopback loses one member (a
# follower, then the leader) during the rendezvous and during the run; the
# job completes every time. The member killed is listed first in
# --rdzv_endpoint, so the agents were talking to it.
. tests/integration/lib.sh
. tests/integration/lib_etcd.sh
need_etcd

FAST="last_call_timeout=1,join_timeout=30,lease_ttl=3,read_timeout=10"
now_ms() { date +%s%3N; }
expect_status() {
	etcd_expect_status "$1" "$2" "${3:-40}"
}
# pick leader|follower: a member of that kind; EP lists it first.
pick() {
	L=$(etcd_leader) || fail "no etcd leader"
	if [ "$1" = leader ]; then V=$L; else for m in $ETCD_NAMES; do [ $m = $L ] || { V=$m; break; }; done; fi
	EP=$(etcd_addr $V)
	for m in $ETCD_NAMES; do [ $m = $V ] || EP="$EP,$(etcd_addr $m)"; done
}

for kind in follower leader; do
	etcd_cluster 3
	# During the rendezvous: one agent waits for the other when the member dies.
	pick $kind; JOB=rdzv-$kind
	note "kill -9 the $kind ($V) during the rendezvous"
	agent a 1 2 --rdzv_conf=$FAST "$FAKE_WORKER" append "$T/r-$kind" run
	wait_for 10 sh -c "grep -q . '$T/a.out' || [ -n \"\$(ETCDCTL_API=3 $ETCDCTL --endpoints=http://$(etcd_addr $V) get --prefix --keys-only /crun/$JOB/k/ 2>/dev/null)\" ]" ||
		fail "agent a never joined"
	etcd_kill $V
	t0=$(now_ms)
	agent b 1 2 --rdzv_conf=$FAST "$FAKE_WORKER" append "$T/r-$kind" run
	expect_status a 0
	expect_status b 0
	expect_eq "both ranks ran" "$(sort "$T/r-$kind" | tr '\n' ' ')" "run 0 0 run 1 0 "
	note "   job done $(( $(now_ms) - t0 )) ms after the kill"

	# During the run: workers run 4 s; the member dies after 1 s.
	etcd_cluster 3
	pick $kind; JOB=run-$kind
	note "kill -9 the $kind ($V) during the run"
	agent a 2 2 --rdzv_conf=$FAST "$FAKE_WORKER" sleep 4000 append "$T/x-$kind" run
	agent b 1 2 --rdzv_conf=$FAST "$FAKE_WORKER" sleep 4000 append "$T/x-$kind" run
	wait_for 20 sh -c "grep -q 'round 0' '$T/a.out' && grep -q 'round 0' '$T/b.out'" || fail "round 0 never formed"
	sleep 1
	etcd_kill $V
	t0=$(now_ms)
	expect_status a 0
	expect_status b 0
	expect_eq "every rank ran once, generation 0" "$(sort "$T/x-$kind" | tr '\n' ' ')" "run 0 0 run 1 0 run 2 0 "
	note "   job done $(( $(now_ms) - t0 )) ms after the kill"
done

# The member the agents watch through freezes (SIGSTOP: no FIN, no answer);
# meanwhile the others move on and compact past what the agents saw. The
# agents fail over, find their watch's revision compacted, read again, and
# the job completes.
etcd_cluster 3
pick follower; JOB=compact
note "freeze $V (SIGSTOP), compact the others past the agents' watch"
C="last_call_timeout=1,join_timeout=30,lease_ttl=6,read_timeout=15"
agent a 1 2 --rdzv_conf=$C "$FAKE_WORKER" sleep 7000 append "$T/c" run
agent b 1 2 --rdzv_conf=$C "$FAKE_WORKER" sleep 7000 append "$T/c" run
wait_for 20 sh -c "grep -q 'round 0' '$T/a.out' && grep -q 'round 0' '$T/b.out'" || fail "round 0 never formed"
etcd_kill $V STOP
at_exit "kill -CONT \$_etcd_pid_$V 2>/dev/null"
other=""; for m in $ETCD_NAMES; do [ $m = $V ] || other=$m; done
for i in 1 2 3 4 5; do etcd_ctl $other put /other/k$i v >/dev/null || fail "put on $other"; done
rev=$(etcd_ctl $other get /other/k5 -w json | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["header"]["revision"])')
etcd_ctl $other compact "$rev" >/dev/null || fail "compact at $rev"
t0=$(now_ms)
expect_status a 0
expect_status b 0
eval "kill -CONT \$_etcd_pid_$V"
expect_eq "both ranks ran once, generation 0" "$(sort "$T/c" | tr '\n' ' ')" "run 0 0 run 1 0 "
cat "$T/a.out" "$T/b.out" >"$T/c.out"
expect_grep "the watch saw the compaction" "etcd compacted past revision" "$T/c.out"
note "   job done $(( $(now_ms) - t0 )) ms after the compaction (at revision $rev)"

# The member the agents talk to freezes (SIGSTOP) during the run with a
# short lease (lease_ttl=3): each try at it costs lease_ttl/4, not 3 s, so
# the keepalives fail over in time, no node is counted lost, and the
# workers' own exit status (3) is the job's. (A frozen leader is kinder:
# the new leader renews every lease.)
etcd_cluster 3
pick follower; JOB=hung-member
note "freeze $V (SIGSTOP) during the run, lease_ttl=3: the workers' status is the job's"
H="last_call_timeout=1,join_timeout=30,lease_ttl=3,read_timeout=10"
agent a 1 2 --rdzv_conf=$H "$FAKE_WORKER" sleep 10000 exit 3
agent b 1 2 --rdzv_conf=$H "$FAKE_WORKER" sleep 10000 exit 3
wait_for 20 sh -c "grep -q 'round 0' '$T/a.out' && grep -q 'round 0' '$T/b.out'" || fail "round 0 never formed"
sleep 1
etcd_kill $V STOP
at_exit "kill -CONT \$_etcd_pid_$V 2>/dev/null"
expect_status a 3
expect_status b 3
eval "kill -CONT \$_etcd_pid_$V"
cat "$T/a.out" "$T/b.out" >"$T/h.out"
expect_nogrep "no node counted lost" "disconnected\|lease expired" "$T/h.out"
exit 0
