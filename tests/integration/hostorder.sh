#!/bin/sh
# Group ranks across hosts (network namespaces, each with its own hostname and
# address) follow the documented order, whatever order the hosts start in:
# the store host first, then by host name. Hosts are started in the opposite
# order of their names, so neither start order nor pid order can pass for the
# name order (a reversed host-name comparison must fail here).
# Needs root.
. tests/integration/lib.sh
. tests/integration/lib_netns.sh

netns_setup 4

# The store host is h4 (started first); then h3, h2, h1 join, in that order.
# Expected: h4 group rank 0, then h1, h2, h3.
cat >"$T/who.sh" <<'EOF'
echo "$GROUP_RANK $(hostname)" >>"$1/who"
EOF
PORT=29460
pids=""
for h in h4 h3 h2 h1; do
	netns_spawn $h "$T/$h.out" "$CRUN" --nnodes=4 --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint="h4:$PORT" --rdzv_id=order --rdzv_conf=join_timeout=30 \
		--no_python sh "$T/who.sh" "$T"
	pids="$pids $NETNS_PID"
	if [ $h = h4 ]; then
		wait_for 10 sh -c "ip netns exec $(netns_ns h4) ss -Hltn 'sport = :$PORT' | grep -q ." ||
			{ cat "$T/h4.out" >&2; fail "h4 never served the store"; }
	fi
done
for p in $pids; do wait_pid 40 $p "$T"/h?.out || { cat "$T"/h?.out >&2; fail "agent $p failed"; }; done
expect_eq "group ranks: store host h4, then by name" "$(sort -n "$T/who")" "0 h4
1 h1
2 h2
3 h3"
note "started h4 h3 h2 h1; ranks h4 h1 h2 h3"
exit 0
