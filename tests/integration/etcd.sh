#!/bin/sh
# The etcd rendezvous backend on real etcd members (loopback): a single
# member and a 3-member cluster, heterogeneous nodes, one job-wide
# generation per failure restart, the loss of group rank 0's agent (survived
# with etcd; with c10d the same kill ends the job), cleanup of the job's
# keys, every member down, and the refusal of etcd-v2.
. tests/integration/lib.sh
. tests/integration/lib_etcd.sh
need_etcd

TTL=2
FAST="last_call_timeout=1,join_timeout=20,lease_ttl=$TTL,read_timeout=5"
now_ms() { date +%s%3N; }
v() { sed -n "s/^$1=//p" "$2"; }
expect_status() {
	etcd_expect_status "$1" "$2" "${3:-30}"
}
no_keys() { [ -z "$(etcd_keys "/crun/$1/")" ]; }

# 0. Usage: etcd-v2 is refused with why and what to use; bad endpoints too.
"$CRUN" --nnodes=2 --rdzv_backend=etcd-v2 --rdzv_endpoint=127.0.0.1:2379 true >"$T/v2.out" 2>&1
expect_eq "etcd-v2 exit status" $? 2
expect_grep "etcd-v2 says why" "v2 API, which etcd 3.4 turns off" "$T/v2.out"
expect_grep "etcd-v2 says what to use" "use --rdzv_backend=etcd" "$T/v2.out"
expect_eq "etcd-v2 one line" "$(wc -l <"$T/v2.out")" 1
"$CRUN" --nnodes=2 --rdzv_backend=etcd --rdzv_endpoint=h1:2379,ftp://h2 true >"$T/bad.out" 2>&1
expect_eq "bad endpoint exit status" $? 2
expect_grep "bad endpoint named" "bad etcd endpoint 'ftp://h2'" "$T/bad.out"
"$CRUN" --nnodes=2 --rdzv_backend=etcd-v3 --rdzv_endpoint=h1,https://h2:2380 --rdzv_conf=protocol=https,lease_ttl=3 --print-config true >"$T/pc.out" 2>&1
expect_eq "etcd-v3 alias accepted" $? 0
expect_grep "alias means etcd" "etcd" "$T/pc.out"

# 1. A single member: 4+2+1 workers, ranks 0-6 ordered by host, addr, pid.
etcd_cluster 1
EP=$ETCD_EP JOB=hetero1
note "1. single member $EP: 4+2+1 workers"
agent a 4 3 --rdzv_conf=$FAST "$FAKE_WORKER" env "$T/h_a"
agent b 2 3 --rdzv_conf=$FAST "$FAKE_WORKER" env "$T/h_b"
agent c 1 3 --rdzv_conf=$FAST "$FAKE_WORKER" env "$T/h_c"
for x in a b c; do expect_status $x 0; done
expect_eq "every rank once" "$(cat "$T"/h_* | sed -n 's/^RANK=//p' | sort -n | tr '\n' ' ')" "0 1 2 3 4 5 6 "
expect_eq "world size" "$(cat "$T"/h_* | sed -n 's/^WORLD_SIZE=//p' | sort -u)" 7
expect_eq "group world size" "$(cat "$T"/h_* | sed -n 's/^GROUP_WORLD_SIZE=//p' | sort -u)" 3
expect_eq "one workers' store" "$(cat "$T"/h_* | sed -n 's/^MASTER_PORT=//p' | sort -u | wc -l)" 1
# Nobody hosts a store: the order is host, address, then pid (a < b < c).
expect_eq "a holds 0-3" "$(cat "$T"/h_a.* | sed -n 's/^RANK=//p' | sort -n | tr '\n' ' ')" "0 1 2 3 "
expect_eq "b holds 4-5" "$(cat "$T"/h_b.* | sed -n 's/^RANK=//p' | sort -n | tr '\n' ' ')" "4 5 "
expect_eq "c holds 6" "$(cat "$T"/h_c.* | sed -n 's/^RANK=//p')" "6"
wait_for 5 no_keys $JOB || { etcd_keys /crun/$JOB/ >&2; fail "a finished job left keys behind"; }
note "   finished job: no keys left under /crun/$JOB/"
etcd_kill m1

# 2. A 3-member cluster: a worker failure on one node restarts every node
#    with one job-wide generation.
etcd_cluster 3
EP=$ETCD_EP JOB=restart
note "2. 3 members $EP: a worker failure restarts the whole job once"
agent a 2 2 --max_restarts=1 --rdzv_conf=$FAST "$FAKE_WORKER" append "$T/runs" run fail-if 3 0 5 hang-if-attempt 0
agent b 2 2 --max_restarts=1 --rdzv_conf=$FAST "$FAKE_WORKER" append "$T/runs" run fail-if 3 0 5 hang-if-attempt 0
expect_status a 0
expect_status b 0
expect_eq "every rank ran generation 1" "$(grep ' 1$' "$T/runs" | sort | tr '\n' ' ')" "run 0 1 run 1 1 run 2 1 run 3 1 "
cat "$T/a.out" "$T/b.out" >"$T/ab.out"
expect_grep "restart counted once, job-wide" "restart 1 of 1 after a worker failure" "$T/ab.out"
expect_nogrep "no second restart" "restart 2 of" "$T/ab.out"

# 3. kill -9 the agent of group rank 0 mid-run: its lease expires, the
#    survivors re-form without it (MIN 2) and finish.
JOB=killg0
note "3. kill -9 group rank 0's agent (etcd): survivors re-form and finish"
W="$FAKE_WORKER append $T/runs3 run hang-if-attempt 0"
agent a 1 2:3 --rdzv_conf=$FAST $W
agent b 1 2:3 --rdzv_conf=$FAST $W
agent c 1 2:3 --rdzv_conf=$FAST $W
g0=""
wait_for 20 sh -c "grep -l 'group rank 0 of 3' '$T/a.out' '$T/b.out' '$T/c.out' >/dev/null" || fail "round 0 never formed"
sleep 0.5
for x in a b c; do grep -q "group rank 0 of 3" "$T/$x.out" && g0=$x; done
eval "kill -9 \$pid_$g0"
t0=$(now_ms)
note "   killed $g0 (group rank 0) at $(date +%T.%3N)"
for x in a b c; do [ $x = $g0 ] || expect_status $x 0 30; done
t1=$(now_ms)
cat "$T/a.out" "$T/b.out" "$T/c.out" >"$T/k.out"
expect_grep "loss named" "(group rank 0) disconnected\|(group rank 0) stopped answering" "$T/k.out"
expect_grep "re-formed with 2" "round 1: group rank . of 2" "$T/k.out"
note "   etcd: survivors re-formed and finished $(( t1 - t0 )) ms after the kill (lease_ttl $TTL s)"
grep "re-forming\|round 1" "$T/k.out" | sed 's/^/      /' | head -4

# ... and the same kill with c10d ends the job (the store host is group rank 0).
PORT=$(free_port) JOB=killg0c10d
note "3b. the same kill with c10d: the job ends"
for x in a b c; do
	"$CRUN" --nnodes=2:3 --nproc_per_node=1 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" \
		--rdzv_id=$JOB --rdzv_conf=last_call_timeout=1,join_timeout=5 $W >"$T/c_$x.out" 2>&1 &
	eval "pid_c_$x=\$!"; at_exit "kill -9 $! 2>/dev/null"
	[ $x = a ] && wait_for 10 listening $PORT
done
wait_for 20 grep -q "group rank 0 of 3" "$T/c_a.out" || fail "c10d round 0 never formed"
kill -9 $pid_c_a
for x in b c; do
	wait_for 30 agent_exited c_$x || fail "c10d agent $x still running"
	eval "wait \$pid_c_$x"; rc=$?
	[ $rc -ne 0 ] || fail "c10d agent $x exited 0 after the store host died"
	note "   c10d agent $x: exit $rc: $(grep -m1 'lost\|stopped\|timed out' "$T/c_$x.out")"
done

# 3c. SIGTERM to group rank 0's agent: it leaves (128+15), the others go on.
JOB=termg0
note "3c. SIGTERM to group rank 0's agent (etcd): it leaves, the others re-form"
W="$FAKE_WORKER append $T/runs3c run hang-if-attempt 0"
agent a 1 2:3 --rdzv_conf=$FAST $W
agent b 1 2:3 --rdzv_conf=$FAST $W
agent c 1 2:3 --rdzv_conf=$FAST $W
wait_for 20 sh -c "grep -l 'group rank 0 of 3' '$T/a.out' '$T/b.out' '$T/c.out' >/dev/null" || fail "round 0 never formed"
sleep 0.5
g0=""; for x in a b c; do grep -q "group rank 0 of 3" "$T/$x.out" && g0=$x; done
eval "kill -TERM \$pid_$g0"
expect_status $g0 143
for x in a b c; do [ $x = $g0 ] || expect_status $x 0 30; done
cat "$T/a.out" "$T/b.out" "$T/c.out" >"$T/t.out"
expect_grep "departure named" "left (SIGTERM)" "$T/t.out"
expect_grep "re-formed with 2" "round 1: group rank . of 2" "$T/t.out"

# 4. A killed job leaves only leased keys: they expire.
JOB=killed
note "4. kill -9 every agent: the job's keys expire with their leases"
agent a 1 2 --rdzv_conf=$FAST "$FAKE_WORKER" hang
agent b 1 2 --rdzv_conf=$FAST "$FAKE_WORKER" hang
wait_for 20 sh -c "grep -q 'round 0' '$T/a.out' && grep -q 'round 0' '$T/b.out'" || fail "killed job never ran"
[ -n "$(etcd_keys /crun/$JOB/)" ] || fail "no keys while the job runs"
kill -9 $pid_a $pid_b
t0=$(now_ms)
# The job's lease: read_timeout + lease_ttl = 7 s at most (plus etcd's tick).
wait_for 15 no_keys $JOB || { etcd_keys /crun/$JOB/ | head >&2; fail "keys of a killed job did not expire"; }
note "   keys gone $(( $(now_ms) - t0 )) ms after the kill"

# 5. Every member down: each agent exits non-zero within read_timeout (5 s)
#    plus lease_ttl, with one line naming the endpoints tried.
JOB=alldown
note "5. every etcd member down: bounded non-zero exit"
agent a 1 2 --rdzv_conf=$FAST "$FAKE_WORKER" hang
agent b 1 2 --rdzv_conf=$FAST "$FAKE_WORKER" hang
wait_for 20 sh -c "grep -q 'round 0' '$T/a.out' && grep -q 'round 0' '$T/b.out'" || fail "job never ran"
for m in $ETCD_NAMES; do etcd_kill $m; done
t0=$(now_ms)
for x in a b; do
	wait_for 15 agent_exited $x || fail "agent $x still running 15 s after etcd went down"
	eval "wait \$pid_$x"; rc=$?
	[ $rc -ne 0 ] || fail "agent $x exited 0 with etcd down"
	expect_grep "$x names the endpoints" "no etcd endpoint answered within 5 s (tried http://127.0.0.1:[0-9]*, http://127.0.0.1:[0-9]*, http://127.0.0.1:[0-9]*)" "$T/$x.out"
done
note "   both agents gave up $(( $(now_ms) - t0 )) ms after the last member died"
grep -h "no etcd endpoint" "$T/a.out" | head -1 | sed 's/^/      /'
exit 0
