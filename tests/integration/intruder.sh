#!/bin/sh
# The rendezvous secret against intruders, on loopback: a 2-node job whose
# agents share a secret file runs while a third agent without the secret,
# one with a wrong secret, and raw wire clients (no handshake) try to join,
# write the round's "end" key and read the keyspace. Every one is refused
# and logged by the store host, and the job finishes undisturbed, status 0,
# with no restart. Also: the secret file's checks (mode, empty, size).
. tests/integration/lib.sh
RAW="$PYTHON $TOP/tests/integration/py/raw_store.py"

umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/secret"
echo "another secret" >"$T/wrong"
PORT=$(free_port) JOB=guarded

# The workers wait (bounded) for $T/go, so the intruders act mid-job.
WORKER='touch "$0.$RANK"; i=0; while [ ! -e "$0.go" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; [ -e "$0.go" ]'
agent() {
	name=$1; shift
	"$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=$JOB "$@" >"$T/$name.out" 2>&1 &
	eval "pid_$name=\$!"
}
agent a --rdzv_conf=secret_file="$T/secret",join_timeout=30 --no_python /bin/sh -c "$WORKER" "$T/w"
at_exit "kill $pid_a"
wait_for 10 listening $PORT || fail "agent a never served the store"
# The second node gets the secret from the environment.
CRUN_RDZV_SECRET_FILE="$T/secret" agent b --rdzv_conf=join_timeout=30 --no_python /bin/sh -c "$WORKER" "$T/w"
at_exit "kill $pid_b"
wait_for 30 test -e "$T/w.0" -a -e "$T/w.1" || { cat "$T/a.out" "$T/b.out" >&2; fail "the job never started its workers"; }

# 1. A third agent without a secret, and one with the wrong secret.
timeout 30 "$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
	--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=$JOB --rdzv_conf=join_timeout=10 \
	/bin/true >"$T/c.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$T/c.out" >&2; fail "agent without the secret: status $rc"; }
expect_grep "agent without the secret is told why" "wants a secret this node lacks" "$T/c.out"
timeout 30 "$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
	--rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=$JOB \
	--rdzv_conf=join_timeout=10,secret_file="$T/wrong" /bin/true >"$T/d.out" 2>&1
rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$T/d.out" >&2; fail "agent with a wrong secret: status $rc"; }
expect_grep "agent with the wrong secret is told why" "does not prove this node's secret" "$T/d.out"

# 2. Raw wire clients: end the round, read the job id, count the keys.
for cmd in "set crun/$JOB/r0/end X_intruder" "set crun/$JOB/r0/end/0 1" "get crun/job" "numkeys" "add crun/$JOB/round 1"; do
	out=$(eval "$RAW 127.0.0.1 $PORT $cmd" 2>&1); rc=$?
	[ $rc -eq 3 ] && [ "$out" = closed ] || fail "raw client '$cmd' was served (status $rc: $out)"
done
# A PyTorch 2.x-style client: VALIDATE, then LIST_KEYS (G3 opcode 17).
"$PYTHON" - "$PORT" <<'EOF' || fail "a G3 LIST_KEYS was served"
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(bytes([0x00, 0xce, 0xf7, 0x85, 0x3c, 17]))
sys.exit(0 if s.recv(100) == b"" else 1)
EOF
# A raw client that sends a garbage AUTH message is refused too.
"$PYTHON" - "$PORT" <<'EOF' || fail "a forged AUTH message was served"
import socket, struct, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(bytes([0x63]) + struct.pack("<Q", 32) + b"\0" * 32)
ch = s.recv(64)  # the challenge: answer it with a wrong proof, then GET
s.sendall(bytes([0x63]) + struct.pack("<Q", 32) + b"\1" * 32 + bytes([2]) + struct.pack("<Q", 8) + b"crun/job")
sys.exit(0 if s.recv(100) == b"" else 1)
EOF

# Every intruder was logged by the store host (agent a), naming the peer.
n=$(grep -c "refusing connection from 127.0.0.1: " "$T/a.out")
[ "$n" -ge 9 ] || { cat "$T/a.out" >&2; fail "host logged $n refusals, want >= 9"; }
expect_nogrep "the secret's job does not call itself unauthenticated" "unauthenticated" "$T/a.out"

# 3. The job goes on undisturbed: release the workers, both agents exit 0.
touch "$T/w.go"
wait $pid_a; rc_a=$?
wait $pid_b; rc_b=$?
[ $rc_a -eq 0 ] && [ $rc_b -eq 0 ] || { cat "$T/a.out" "$T/b.out" >&2; fail "job status $rc_a/$rc_b, want 0/0"; }
cat "$T/a.out" "$T/b.out" >"$T/ab.out"
expect_nogrep "no restart" "restart" "$T/ab.out"
expect_nogrep "no round ended early" "round .* ended\|malformed" "$T/ab.out"

# 4. The secret file's checks: group-readable, empty, too large.
bad_secret() {
	"$CRUN" --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$(free_port)" \
		--rdzv_conf=secret_file="$1",join_timeout=5 /bin/true >"$T/bad.out" 2>&1 &&
		fail "secret file $1 accepted"
	expect_grep "secret file $1" "$2" "$T/bad.out"
}
cp "$T/secret" "$T/open" && chmod 640 "$T/open"
bad_secret "$T/open" "accessible to group or others (mode 0640): chmod 600"
: >"$T/empty"
bad_secret "$T/empty" "is empty"
head -c 5000 /dev/zero >"$T/big"
bad_secret "$T/big" "larger than 4096 bytes"
bad_secret "$T/missing" "No such file"

# 5. Without a secret, the host says once that the rendezvous is open.
PORT=$(free_port) JOB=open
agent e --rdzv_conf=last_call_timeout=1 /bin/true
agent f --rdzv_conf=last_call_timeout=1 /bin/true
wait $pid_e || fail "open job, agent e"
wait $pid_f || fail "open job, agent f"
expect_eq "one unauthenticated warning" "$(cat "$T/e.out" "$T/f.out" | grep -c unauthenticated)" 1
exit 0
