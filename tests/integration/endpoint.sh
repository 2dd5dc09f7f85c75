#!/bin/sh
# The rendezvous endpoint's failure branches (src/rdzv/rdzv_store.c), on loopback:
#   1. nothing at the endpoint (is_host=false): "could not reach the
#      rendezvous host ... within N s", bounded by the join timeout;
#   2. something that answers, but not as a crun store: named, at once;
#   3. the endpoint port held for a while by a listener that never answers
#      and then goes: the agents wait as clients, then one binds the port
#      (take-over) and the job runs.
. tests/integration/lib.sh

now_ms() { date +%s%3N; }
# holder SCRIPT: run a Python port holder in the background; wait until it
# wrote $T/held.
holder() {
	rm -f "$T/held"
	"$PYTHON" -c "$1" &
	hp=$!
	at_exit "kill $hp"
	wait_for 10 test -f "$T/held" || fail "the port holder did not start"
}

# 1. Nobody listens.
PORT=$(free_port)
t0=$(now_ms)
"$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" \
	--rdzv_conf=is_host=false,join_timeout=2 "$FAKE_WORKER" exit 0 >"$T/1.out" 2>&1 &
p=$!
wait_pid 10 $p "$T/1.out"
expect_eq "status with nothing at the endpoint" "$?" 1
ms=$(( $(now_ms) - t0 ))
expect_grep "unreachable host named" "could not reach the rendezvous host 127.0.0.1:$PORT within 2 s (connection refused)" "$T/1.out"
[ $ms -le 4000 ] || fail "gave up after $ms ms, want <= 4000 (join_timeout=2)"
note "1. unreachable endpoint: gave up after $ms ms"

# 2. A listener that sends bytes no crun store would send.
PORT=$(free_port)
holder "
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', $PORT)); s.listen()
open('$T/held', 'w').write('1')
while True:
    c, _ = s.accept(); c.sendall(b'\xff' * 64); c.close()
"
"$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" \
	--rdzv_conf=is_host=false,join_timeout=20 "$FAKE_WORKER" exit 0 >"$T/2.out" 2>&1 &
p=$!
wait_pid 10 $p "$T/2.out"
expect_eq "status against a foreign server" "$?" 1
expect_grep "foreign server named" "127.0.0.1:$PORT answers, but not as a crun store; it is held by pid $hp (python3)" "$T/2.out"
kill $hp; wait_pid 5 $hp 2>/dev/null
note "2. a foreign server at the endpoint is named"

# 3. The port is held (listening on every address, never answering) for
# 1.5 s: both agents find it taken and wait as clients; when it is free,
# one of them binds it and serves the rendezvous.
PORT=$(free_port)
holder "
import socket, time
a = socket.socket(); a.bind(('0.0.0.0', $PORT)); a.listen(16)
b = socket.socket(socket.AF_INET6); b.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
b.bind(('::', $PORT)); b.listen(16)
open('$T/held', 'w').write('1')
time.sleep(1.5)
"
t0=$(now_ms)
for x in a b; do
	"$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" \
		--rdzv_conf=join_timeout=20 "$FAKE_WORKER" exit 0 >"$T/3$x.out" 2>&1 &
	eval "p$x=\$!"
done
wait_pid 20 $pa "$T/3a.out" "$T/3b.out" || fail "agent a failed after the take-over: $(cat "$T/3a.out")"
wait_pid 20 $pb "$T/3a.out" "$T/3b.out" || fail "agent b failed after the take-over: $(cat "$T/3b.out")"
ms=$(( $(now_ms) - t0 ))
[ $ms -ge 1300 ] || fail "the job ran after $ms ms, before the holder let go of the port (1.5 s)"
cat "$T/3a.out" "$T/3b.out" >"$T/3.out"
expect_grep "one of them hosts" "group rank 0 of 2" "$T/3.out"
expect_grep "the other joins" "group rank 1 of 2" "$T/3.out"
note "3. port held 1.5 s, then taken over: the job ran after $ms ms"
exit 0
