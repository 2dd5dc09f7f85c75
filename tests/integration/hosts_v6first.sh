#!/bin/sh
# localhost resolving to ::1 first, as on a stock Debian /etc/hosts (`::1
# localhost` listed: the resolver sorts ::1 before 127.0.0.1), with the
# stores listening on 127.0.0.1 only, so that ::1 refuses. Every command runs
# in a mount namespace of its own with a private /etc/hosts bind-mounted
# (the machine's file is never touched); the clients must move on from ::1
# to 127.0.0.1:
#   1. the async store client's unit test that names localhost (wait_released)
#   2. a 2-node loopback job, --rdzv_endpoint=localhost:PORT, against a
#      `crun store --host 127.0.0.1`, and `crun status` of it by that name
. tests/integration/lib.sh

need_root "a mount namespace and a bind mount over /etc/hosts"
command -v unshare >/dev/null || skip "no unshare(1)"
command -v getent >/dev/null || skip "no getent(1)"
printf '::1 localhost\n127.0.0.1 localhost\n' >"$T/hosts"
machine_hosts=$(cksum </etc/hosts)

# ns CMD...: CMD in a mount namespace of its own whose /etc/hosts is
# $T/hosts (unshare -m makes its mounts private). ns_bg CMD... &: the same
# in the background, $! being CMD's pid (the subshell execs it).
ns() { unshare -m sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$T/hosts" "$@"; }
ns_bg() { exec unshare -m sh -c 'mount --bind "$0" /etc/hosts && exec "$@"' "$T/hosts" "$@"; }

ns true 2>"$T/ns.err" || skip "cannot bind-mount /etc/hosts in a mount namespace: $(cat "$T/ns.err")"
first=$(ns getent ahosts localhost | awk 'NR == 1 { print $1 }')
[ "$first" = "::1" ] || skip "localhost resolves to '$first' first under the private hosts file, not ::1 (no IPv6 on loopback?)"
note "under the private /etc/hosts localhost is ::1 first"

# ---------------------------------------------------------------------------
note "1. the async client's unit test against a server on 127.0.0.1"
UNIT=$TOP/$BUILD/tests/test_store_aclient
[ -x "$UNIT" ] || fail "$UNIT not built (make BUILD=$BUILD $BUILD/tests/test_store_aclient)"
ns "$UNIT" --filter='store_aclient/wait_released' --short-filename >"$T/unit.out" 2>&1 ||
	{ cat "$T/unit.out" >&2; fail "test_store_aclient wait_released failed with ::1 first"; }
expect_grep "the unit test ran" "Tested: 1 | Passing: 1" "$T/unit.out"

# ---------------------------------------------------------------------------
note "2. a 2-node job and crun status at localhost, the store on 127.0.0.1"
ns_bg "$CRUN" store --port 0 --host 127.0.0.1 2>"$T/store.err" &
spid=$!
at_exit "kill $spid"
wait_for 10 grep -q 'listening on' "$T/store.err" || fail "crun store never listened: $(cat "$T/store.err")"
PORT=$(sed -n 's/.*listening on .*:\([0-9]*\)$/\1/p' "$T/store.err" | head -n 1)
"$PYTHON" - "$PORT" <<'EOF' || fail "::1 does not refuse port $PORT: the test would not reach the path it checks"
import errno, socket, sys
s = socket.socket(socket.AF_INET6)
try:
    s.connect(("::1", int(sys.argv[1])))
except OSError as e:
    sys.exit(0 if e.errno == errno.ECONNREFUSED else 1)
sys.exit(1)
EOF

JOB=v6first
# agent NAME: one node of the job in the background (log $T/NAME.out).
agent() {
	ns_bg "$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=c10d \
		--rdzv_endpoint="localhost:$PORT" --rdzv_id=$JOB \
		--rdzv_conf=is_host=false,join_timeout=10,last_call_timeout=1 \
		"$FAKE_WORKER" sleep 3000 exit 0 >"$T/$1.out" 2>&1 &
	eval "pid_$1=\$!"
}
agent a
agent b
at_exit "kill $pid_a $pid_b"
running() {
	ns "$CRUN" status --rdzv_endpoint="localhost:$PORT" --rdzv_id=$JOB --timeout=2 \
		>"$T/st.out" 2>"$T/st.err"
}
# Bounded in time, not in tries: a status that cannot connect takes 2 s.
t_end=$(( $(now_ms) + 20000 ))
until running; do
	[ "$(now_ms)" -lt $t_end ] ||
		{ cat "$T/st.out" "$T/st.err" "$T/a.out" "$T/b.out" >&2; fail "crun status never saw the job running within 20 s"; }
	sleep 0.2
done
for x in a b; do
	eval "wait_pid 30 \$pid_$x \"$T/$x.out\""
	rc=$?
	[ $rc = 0 ] || { cat "$T/$x.out" >&2; fail "agent $x exited $rc, want 0"; }
done
expect_nogrep "no unreachable host" "could not reach" "$T/a.out"
expect_eq "the machine's /etc/hosts" "$(cksum </etc/hosts)" "$machine_hosts"
exit 0
