#!/bin/sh
# The scale simulator (tests/bench/rdzv_sim), small and fast:
#  - 64 and 256 rendezvous nodes (real src/rdzv/rdzv.c instances over the c10d
#    backend, against a store hosted as an agent hosts it) form a round with
#    group ranks 0..N-1 once each, the host's node 0 (rdzv_sim checks and
#    exits non-zero otherwise), stay up through a quiet window, and re-form
#    without a SIGKILLed node. Heartbeats are slowed to 10 s so that only the
#    store host seeing the dead node's connection close can notice it in time:
#    detection within 3 s.
#  - a round stays O(N): store operations grow at most linearly with N and
#    the bytes each node moves do not grow with N (they did when every node
#    read the round's address list: O(N^2) bytes per round).
#  - heartbeat_rate bounds the store host's heartbeat load.
#  - crun does not load libcurl or libmicrohttpd at exec (agent start-up
#    at 1024 agents).
#  - 256 simulated ranks initialise through `crun store` and through the
#    do-nothing floor server.
#  - 1024 simulated ranks, 8 a node, initialise through 128 per-node relays
#    (tests/bench/relay_sim, which checks every reply): the store holds one
#    connection per relay and runs fewer requests than there are ranks.
. "$(dirname "$0")/lib.sh"

SIM=${RDZV_SIM:-$PWD/$BUILD/tests/rdzv_sim}
LOAD=$PWD/$BUILD/tests/store_load
[ -x "$SIM" ] || fail "no rdzv_sim at $SIM (make check-build)"
[ -x "$CRUN" ] || fail "no crun at $CRUN (build first)"

timeout 120 "$SIM" rdzv --sizes 64,256 --steady 0.5 --keep-alive 10 \
	--timeout 30 >"$T/rdzv.csv" 2>"$T/rdzv.err"
rc=$?
cat "$T/rdzv.csv"
[ "$rc" -eq 0 ] || fail "rdzv_sim rdzv exited $rc: $(grep -v unauthenticated "$T/rdzv.err" | tail -n 3)"
field() { awk -F, -v c="$1" -v n="$2" -v f="$3" '$1 == c && $2 == n { print $f }' "$T/rdzv.csv"; }
for n in 64 256; do
	for c in rdzv-form rdzv-steady rdzv-reform; do
		[ -n "$(field $c $n 3)" ] || fail "no $c row for N=$n"
	done
	det=$(field rdzv-reform $n 4)
	awk -v d="$det" 'BEGIN { exit !(d < 3) }' ||
		fail "N=$n: the lost node was noticed after $det s (want < 3 s: on_vanish, not heartbeats)"
done
o64=$(field rdzv-form 64 5) o256=$(field rdzv-form 256 5)
b64=$(field rdzv-form 64 6) b256=$(field rdzv-form 256 6)
note "ops per round: $o64 (64 nodes), $o256 (256); bytes per node: $b64, $b256"
awk -v a="$o64" -v b="$o256" 'BEGIN { exit !(b <= 4.5 * a) }' ||
	fail "store operations per round grew faster than N: $o64 at 64 nodes, $o256 at 256"
awk -v a="$b64" -v b="$b256" 'BEGIN { exit !(b <= 1.5 * a) }' ||
	fail "bytes per node grew with N: $b64 at 64 nodes, $b256 at 256 (O(N^2) per round)"

# heartbeat_rate bounds the heartbeats the host takes, whatever N: 256 nodes
# at 0.5 s would send 1024 ops/s (an ADD of their own, a read of their
# successor's); at a rate of 100 heartbeats/s the interval grows to 2.56 s.
timeout 120 "$SIM" rdzv --sizes 256 --steady 3 --keep-alive 0.5 \
	--heartbeat-rate 100 --timeout 30 >"$T/hb.csv" 2>"$T/hb.err" ||
	fail "rdzv_sim with --heartbeat-rate 100: $(grep -v unauthenticated "$T/hb.err" | tail -n 3)"
hb=$(awk -F, '$1 == "rdzv-steady" { print $5 }' "$T/hb.csv")
note "heartbeat ops/s at 256 nodes, heartbeat_rate=100: $hb (unbounded: 1024)"
awk -v h="$hb" 'BEGIN { exit !(h != "" && h <= 300) }' ||
	fail "heartbeat_rate=100 did not bound the heartbeats: $hb ops/s (want <= 300)"

timeout 120 "$SIM" workers --crun "$CRUN" --floor "$LOAD" --sizes 256 \
	--timeout 30 >"$T/w.csv" 2>"$T/w.err"
rc=$?
cat "$T/w.csv"
[ "$rc" -eq 0 ] || fail "rdzv_sim workers exited $rc: $(tail -n 3 "$T/w.err")"
grep -q '^workers,256,[0-9.]*,[0-9.]*,' "$T/w.csv" || fail "no workers row with a floor figure"
# 256 ranks: ADD, WAIT and 3 GETs each, plus the SET that opens the barrier.
expect_eq "workers' store ops" "$(awk -F, '{ print $5 }' "$T/w.csv")" 1281
timeout 120 "$PWD/$BUILD/tests/relay_sim" --floor "$LOAD" --sizes 1024 \
	--timeout 30 >"$T/x.csv" 2>"$T/x.err"
rc=$?
cat "$T/x.csv" "$T/x.err"
[ "$rc" -eq 0 ] || fail "relay_sim exited $rc: $(tail -n 3 "$T/x.err")"
expect_eq "store connections behind 128 relays" "$(awk -F, '{ print $10 }' "$T/x.csv")" 128
awk -F, '{ exit !($11 > 0 && $11 < 1) }' "$T/x.csv" ||
	fail "relays: $(awk -F, '{ print $11 }' "$T/x.csv") requests per rank reached the store (want < 1)"
# Agent start-up: libcurl (30 libraries with its own dependencies) is opened
# only by the etcd backend, and libmicrohttpd (gnutls and 8 more) only by
# --metrics_port, not loaded by every crun at exec.
if command -v ldd >/dev/null 2>&1; then
	ldd "$CRUN" >"$T/ldd" 2>&1
	expect_nogrep "crun's libraries" libcurl "$T/ldd"
	expect_nogrep "crun's libraries" libmicrohttpd "$T/ldd"
	note "crun loads $(grep -c '=>' "$T/ldd") shared libraries at exec"
fi
echo "scale_short: ok"
