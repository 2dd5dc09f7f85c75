#!/bin/sh
# Leaving out a failing node across hosts: three network-namespace
# hosts h1 (store host), h2, h3 with their own names and addresses
# (lib_netns.sh), --nnodes=2:3, --rdzv_conf=exclude_after=2. h3's worker
# always fails (the script is keyed on the host name); h1's and h2's succeed
# after a while. h3 is left out after two failed rounds, h1 and h2 finish
# as a round of 2, h3 says why and exits 0. Needs root.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh

netns_setup 3

cat >"$T/worker.sh" <<'EOF'
# A bad GPU on h3: its worker always fails; elsewhere it trains a while.
echo "$(hostname) $TORCHELASTIC_RESTART_COUNT" >>"$1/runs"
if [ "$(hostname)" = h3 ]; then sleep 0.2; exit 3; fi
sleep 4
EOF
PORT=29414
agent() { # HOST
	netns_spawn "$1" "$T/$1.out" "$CRUN" --nnodes=2:3 --nproc_per_node=1 --max_restarts=3 \
		--rdzv_backend=c10d --rdzv_endpoint="h1:$PORT" --rdzv_id=exclnet \
		--rdzv_conf=last_call_timeout=1,join_timeout=30,exclude_after=2,exclude_for=600 \
		--event_log="$T/$1.ev" --no_python sh "$T/worker.sh" "$T"
	eval "pid_$1=\$NETNS_PID"
}
t0=$(now_ms)
agent h1
wait_for 10 sh -c "ip netns exec $(netns_ns h1) ss -Hltn 'sport = :$PORT' | grep -q ." ||
	{ cat "$T/h1.out" >&2; fail "h1 never served the store"; }
agent h2
agent h3
for h in h1 h2 h3; do
	eval "p=\$pid_$h"
	wait_pid 90 "$p" "$T/$h.out"; rc=$?
	[ "$rc" = 0 ] || { cat "$T"/h?.out >&2; fail "$h exited $rc, want 0"; }
done
note "job done in $(( $(now_ms) - t0 )) ms"
expect_eq "h3's worker ran twice" "$(grep -c '^h3 ' "$T/runs")" 2
expect_eq "h1's worker ran in rounds 0, 1, 2" "$(grep '^h1 ' "$T/runs" | cut -d' ' -f2 | tr '\n' ' ')" "0 1 2 "
expect_grep "h3 says why" "h3 is left out until .*: the last 2 failure-ended rounds (to round 1) failed first on it; it waits as a spare" "$T/h3.out"
expect_grep "h3's exit line" "the job finished without h3, which was left out after repeated failures: all nodes finished; exiting with status 0" "$T/h3.out"
for h in h1 h2; do
	expect_grep "$h names h3" "h3 (h3) is left out of the next rounds" "$T/$h.out"
	expect_grep "$h ran round 2 with 2 nodes" "round 2: group rank . of 2" "$T/$h.out"
	expect_grep "$h's event" '"node_host":"h3".*"name":"crun.node.excluded"' "$T/$h.ev"
done
expect_grep "h3's event" '"node_host":"h3".*"self":true.*"name":"crun.node.excluded"' "$T/h3.ev"
note "h3 left out after 2 failures; h1 and h2 finished in a round of 2; h3 exited 0"
exit 0
