#!/bin/sh
# Leaving out a failing node with the etcd backend, on one real
# etcd member on loopback: the same rendezvous code (src/rdzv/rdzv.c) over
# rdzv_kv_ops, so the records and the decision are the same as with c10d.
# Three agents (--nnodes=2:3, told apart by --local_addr); c's worker always
# fails. With exclude_after=2, c is left out after two failed rounds, a and b
# finish as a round of 2, and c says why and exits 0.
. tests/integration/lib.sh
. tests/integration/lib_etcd.sh
need_etcd

etcd_cluster 1
EP=$ETCD_EP JOB=excl$$
CONF="last_call_timeout=1,join_timeout=30,lease_ttl=3,read_timeout=10,exclude_after=2"
GOOD="$FAKE_WORKER append $T/runs ok sleep 4000 exit 0"
agent a 1 2:3 --max_restarts=3 --local_addr=127.0.0.1 --rdzv_conf=$CONF $GOOD
agent b 1 2:3 --max_restarts=3 --local_addr=127.0.0.2 --rdzv_conf=$CONF $GOOD
agent c 1 2:3 --max_restarts=3 --local_addr=127.0.0.3 --rdzv_conf=$CONF \
	"$FAKE_WORKER" append "$T/runs" bad sleep 200 exit 3
for x in a b c; do etcd_expect_status $x 0 60; done
expect_eq "rounds that c failed" "$(grep -c '^bad' "$T/runs")" 2
expect_grep "c says why" "is left out until .*the last 2 failure-ended rounds (to round 1) failed first on it; it waits as a spare" "$T/c.out"
expect_grep "c's exit line" "the job finished without .*all nodes finished; exiting with status 0" "$T/c.out"
for x in a b; do
	expect_grep "$x names c" "(127.0.0.3) is left out of the next rounds" "$T/$x.out"
	expect_grep "$x ran round 2 with 2 nodes" "round 2: group rank . of 2" "$T/$x.out"
done
note "etcd: c left out after 2 failures, a and b finished in a round of 2, c exited 0"
exit 0
