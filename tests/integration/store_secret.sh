#!/bin/sh
# `crun store --secret-file` (or CRUN_RDZV_SECRET_FILE): a standalone
# rendezvous store for agents that share a secret. Agents with the secret
# form their job through it; an agent without it is told why and a raw wire
# client is served nothing; the secret file's checks apply (exit 2).
. tests/integration/lib.sh
RAW="$PYTHON $TOP/tests/integration/py/raw_store.py"

umask 077
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$T/secret"

# Bad secret files are usage errors, named.
printf 's3cret' >"$T/open"
chmod 644 "$T/open"
"$CRUN" store --port 0 --secret-file "$T/open" >"$T/bad.out" 2>&1
expect_eq "a group-readable secret file: status" $? 2
expect_grep "a group-readable secret file is named" "$T/open" "$T/bad.out"
"$CRUN" store --port 0 --secret-file "$T/missing" >"$T/bad2.out" 2>&1
expect_eq "a missing secret file: status" $? 2

start_store() { # name [args]: a store on a free port, its port in $PORT
	name=$1; shift
	"$CRUN" store --port 0 "$@" >"$T/$name.log" 2>&1 &
	eval "pid_$name=\$!"
	at_exit "kill $!"
	wait_for 10 grep -q "listening on" "$T/$name.log" || fail "store $name never listened"
	PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$T/$name.log")
}
run_agent() { # name args...
	name=$1; shift
	timeout 60 "$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint="127.0.0.1:$PORT" "$@" >"$T/$name.out" 2>&1
	echo $? >"$T/$name.rc"
}

# 1. Two agents with the secret (one through the environment) run a job.
start_store s1 --secret-file "$T/secret"
run_agent a --rdzv_id=j1 --rdzv_conf=secret_file="$T/secret" --no_python /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"' &
CRUN_RDZV_SECRET_FILE="$T/secret" run_agent b --rdzv_id=j1 --no_python /bin/sh -c 'echo "rank $RANK of $WORLD_SIZE"' &
wait_for 60 test -s "$T/a.rc" -a -s "$T/b.rc" || fail "the agents never finished"
expect_eq "agent a status" "$(cat "$T/a.rc")" 0
expect_eq "agent b status" "$(cat "$T/b.rc")" 0
cat "$T/a.out" "$T/b.out" >"$T/ab.out"
expect_grep "rank 0 ran" "^rank 0 of 2$" "$T/ab.out"
expect_grep "rank 1 ran" "^rank 1 of 2$" "$T/ab.out"

# 2. An agent without the secret is refused and told why.
run_agent c --rdzv_id=j2 --rdzv_conf=join_timeout=10 /bin/true
[ "$(cat "$T/c.rc")" -ne 0 ] || fail "an agent without the secret joined"
expect_grep "agent without the secret is told why" "wants a secret this node lacks" "$T/c.out"

# 3. A raw wire client (PyTorch's protocol, no handshake) gets nothing.
$RAW 127.0.0.1 "$PORT" set stolen x get stolen >"$T/raw.out" 2>&1
expect_eq "raw client on the guarded store: status" $? 3
expect_grep "raw client on the guarded store is closed" "^closed$" "$T/raw.out"

# 4. A connection that never authenticates does not hold its slot: closed
# after --idle-timeout, and the store says why.
start_store s3 --secret-file "$T/secret" --idle-timeout 1
"$PYTHON" - "$PORT" >"$T/silent.out" 2>&1 <<'EOF2'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(20)
t = time.time()
print("eof after %.1f s" % (time.time() - t) if s.recv(1) == b"" else "data")
EOF2
expect_grep "silent client closed by the store" "^eof after" "$T/silent.out"
expect_grep "the store names why" "not authenticated within idle-timeout 1 s" "$T/s3.log"

# 5. The same store without a secret serves anyone (the default).
start_store s2
run_agent d --rdzv_id=j3 --no_python /bin/true &
run_agent e --rdzv_id=j3 --no_python /bin/true &
wait_for 60 test -s "$T/d.rc" -a -s "$T/e.rc" || fail "the agents of the open store never finished"
$RAW 127.0.0.1 "$PORT" set k v get k >"$T/raw3.out" 2>&1 || fail "raw client on the open store: $(cat "$T/raw3.out")"
expect_grep "raw client on the open store reads" "^v$" "$T/raw3.out"
expect_eq "open store: agent d status" "$(cat "$T/d.rc")" 0
expect_eq "open store: agent e status" "$(cat "$T/e.rc")" 0
exit 0
