#!/bin/sh
# The workers' store is confined to the round's nodes (PyTorch's clients
# cannot authenticate): across three network-namespace hosts, a 2-node job
# on h1 and h2 serves its members' workers, while h3, not in the round, is
# closed at accept and named in h1's log. With --rdzv_conf=store_allow=any
# h3 is served. Needs root.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh

netns_setup 3
export PYTHON
RAW="$TOP/tests/integration/py/raw_store.py"
H3=$(netns_addr h3)

# Each worker records the workers' store address, then talks to it (an ADD
# of its own key) and waits, bounded, for $0.go.
WORKER='echo "$MASTER_ADDR $MASTER_PORT" >"$0.addr.$GROUP_RANK"
"$PYTHON" "$1" "$MASTER_ADDR" "$MASTER_PORT" add "member$GROUP_RANK" 1 >"$0.served.$GROUP_RANK" 2>&1
i=0; while [ ! -e "$0.go" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; [ -e "$0.go" ]'

# job NAME PORT [rdzv_conf extra]: a 2-node job on h1 and h2, in the background.
job() {
	_n=$1 _p=$2 _x=${3:-}
	for h in h1 h2; do
		netns_spawn $h "$T/$_n.$h.out" "$CRUN" --nnodes=2 --nproc_per_node=1 \
			--rdzv_backend=c10d --rdzv_endpoint="h1:$_p" --rdzv_id="$_n" \
			--rdzv_conf="last_call_timeout=1,join_timeout=20$_x" \
			--no_python /bin/sh -c "$WORKER" "$T/$_n" "$RAW"
		eval "pid_${_n}_$h=\$NETNS_PID"
	done
}
# finish NAME: release the workers; both agents exit 0 within 30 s.
finish() {
	touch "$T/$1.go"
	for h in h1 h2; do
		eval "p=\$pid_${1}_$h"
		wait_for 30 sh -c "! kill -0 $p 2>/dev/null || grep -qs '^State:.Z' /proc/$p/status" ||
			fail "$1: agent on $h still running"
		wait "$p"; rc=$?
		[ "$rc" -eq 0 ] || { cat "$T/$1.$h.out" >&2; fail "$1: agent on $h exited $rc"; }
	done
}
served() { [ -s "$1" ] && [ "$(cat "$1")" = 1 ]; }

# 1. Default (store_allow=round): members served, h3 refused and logged.
job confined 29411
wait_for 30 served "$T/confined.served.0" && wait_for 30 served "$T/confined.served.1" || {
	cat "$T"/confined.* >&2; fail "confined: the members' workers were not served"; }
read -r maddr mport <"$T/confined.addr.1"
out=$(netns_exec h3 "$PYTHON" "$RAW" "$maddr" "$mport" add intruder 1 2>&1); rc=$?
[ $rc -eq 3 ] && [ "$out" = closed ] || fail "confined: h3 was served by $maddr:$mport (status $rc: $out)"
wait_for 10 grep -q "refusing connection from $H3: not a node of this round" "$T/confined.h1.out" ||
	{ cat "$T/confined.h1.out" >&2; fail "confined: h1 did not log the refusal of h3 ($H3)"; }
# The member on h2 can still talk to it after the refusal.
out=$(netns_exec h2 "$PYTHON" "$RAW" "$maddr" "$mport" add member1 1 2>&1)
expect_eq "confined: h2 served after h3 was refused" "$out" 2
finish confined

# 2. store_allow=any: h3 is served.
job open 29412 ",store_allow=any"
wait_for 30 served "$T/open.served.1" || { cat "$T"/open.* >&2; fail "open: h2's worker was not served"; }
read -r maddr mport <"$T/open.addr.1"
out=$(netns_exec h3 "$PYTHON" "$RAW" "$maddr" "$mport" add intruder 1 2>&1)
expect_eq "open: h3 served with store_allow=any" "$out" 1
expect_nogrep "open: no refusal" "refusing connection" "$T/open.h1.out"
finish open
exit 0
