#!/bin/sh
# The etcd backend against a sick or hostile endpoint (tests/helpers/
# fake_etcd.py): a watch that floods, one huge watch line, a token refused
# for ever, a watch canceled at once, "too many requests", ranges of
# millions of empty kvs, a watch that never answers. Each time crun keeps
# its leases alive and its signals prompt, bounds its memory and request
# rate, and ends with one line naming what etcd did.
. tests/integration/lib.sh

FAKE_ETCD="$TOP/tests/helpers/fake_etcd.py"
TTL=3
CONF="last_call_timeout=1,join_timeout=60,lease_ttl=$TTL,read_timeout=5"

# fake NAME MODE [fake_etcd.py flags]: start a fake etcd; FPORT, $T/NAME.log.
fake() {
	_name=$1 _mode=$2; shift 2
	"$PYTHON" "$FAKE_ETCD" --mode "$_mode" --log "$T/$_name.log" "$@" >"$T/$_name.port" 2>"$T/$_name.err" &
	eval "fpid_$_name=$!"
	at_exit "kill $! 2>/dev/null"
	wait_for 10 test -s "$T/$_name.port" || fail "fake etcd ($_mode) did not start"
	FPORT=$(head -1 "$T/$_name.port")
}
# node NAME NNODES [crun flags]: one agent (a worker that would run 60 s).
node() {
	_name=$1 _nn=$2; shift 2
	"$CRUN" --nnodes="$_nn" --nproc_per_node=1 --rdzv_backend=etcd --rdzv_endpoint="127.0.0.1:$FPORT" \
		--rdzv_id=hostile "$@" "$FAKE_WORKER" sleep 60000 >"$T/$_name.out" 2>&1 &
	eval "pid_$_name=\$!"
	at_exit "kill -9 $! 2>/dev/null"
}
# count LOG WHAT: requests (or notes) WHAT logged by the fake.
count() { grep -c " $2\$" "$T/$1.log"; }
# after LOG NOTE WHAT: requests WHAT logged after the fake's NOTE.
after() { sed -n "/ $2\$/,\$p" "$T/$1.log" | grep -c " $3\$"; }
# at_least N CMD...: CMD prints a number >= N.
at_least() { _al=$1; shift; [ "$("$@")" -ge "$_al" ]; }
# cpu_s PID: user + system CPU seconds the process used.
cpu_s() { awk '{ printf "%d", ($14 + $15) / 100 }' "/proc/$1/stat"; }
# stops_within MS NAME: SIGTERM, then the agent exits 143 within MS.
stops_within() {
	eval "_p=\$pid_$2"
	kill -TERM "$_p"
	_ms=$(ms_until "$1" exited "$_p") || fail "$2: SIGTERM handled after ${_ms} ms (bound $1 ms)"
	wait "$_p"; _rc=$?
	expect_eq "$2 exit status after SIGTERM" $_rc 143
	note "   SIGTERM handled in $_ms ms"
}

# 5a. A watch that floods small valid messages for 20 s: the leases are
#     kept alive (every lease_ttl/3) and SIGTERM is handled at once.
note "5a. a watch flood: keepalives on time, SIGTERM prompt"
fake fl flood --flood 20
node a 2 --rdzv_conf=$CONF
wait_for 10 grep -q " flood-start\$" "$T/fl.log" || fail "the watch flood never started"
# Two leases, each refreshed every second: 6 keepalives in 3 s, with slack.
wait_for 8 at_least 6 after fl flood-start /v3/lease/keepalive ||
	fail "$(after fl flood-start /v3/lease/keepalive) keepalives in 8 s of watch flood (want 6, every $((TTL * 1000 / 3)) ms)"
grep -q " flood-over\$" "$T/fl.log" && fail "the flood ended before the checks"
note "   $(after fl flood-start /v3/lease/keepalive) keepalives during the flood"
stops_within 2000 a

# 5b. One watch line of 60 MB: bounded by the message cap, no CPU storm,
#     the leases stay alive.
note "5b. a 60 MB watch line: refused cheaply, keepalives on time"
fake hl hugeline --huge 60
node a 2 --rdzv_conf=$CONF
wait_for 15 grep -q " hugeline-start\$" "$T/hl.log" || fail "the huge line never started"
wait_for 8 at_least 4 after hl hugeline-start /v3/lease/keepalive ||
	fail "$(after hl hugeline-start /v3/lease/keepalive) keepalives in 8 s after the huge line (want 4)"
c=$(cpu_s $pid_a)
[ "$c" -le 3 ] || fail "the huge line cost $c s of CPU"
note "   $c s of CPU, $(after hl hugeline-start /v3/lease/keepalive) keepalives after the huge line"
stops_within 2000 a
exit 0
