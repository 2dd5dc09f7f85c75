#!/bin/sh
# The etcd backend against a sick or hostile endpoint (tests/helpers/
# fake_etcd.py): a watch that floods, one huge watch line, a token refused
# for ever, a watch canceled at once, "too many requests", ranges of
# millions of empty kvs or strings, a watch that never answers. Each time
# crun keeps its leases alive and its signals prompt, bounds its memory and
# request rate, and ends with one line naming what etcd did.
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

SHORT="last_call_timeout=1,join_timeout=30,lease_ttl=$TTL,read_timeout=3"
# ends_within MS NAME WANT PATTERN: the agent exits WANT within MS, with
# exactly one line matching PATTERN.
ends_within() {
	eval "_p=\$pid_$2"
	_ms=$(ms_until "$1" exited "$_p") || { cat "$T/$2.out" >&2; fail "$2 still running after ${_ms} ms (bound $1 ms)"; }
	wait "$_p"; _rc=$?
	[ $_rc = "$3" ] || { cat "$T/$2.out" >&2; fail "$2 exited $_rc, want $3"; }
	[ "$(grep -c -e "$4" "$T/$2.out")" = 1 ] || cat "$T/$2.out" >&2
	expect_eq "lines saying '$4'" "$(grep -c -e "$4" "$T/$2.out")" 1
	note "   exit $_rc after $_ms ms: $(grep -e "$4" "$T/$2.out")"
}

# 6. A token refused as soon as it is issued: pauses between the
#    authentications, exit 1 within read_timeout, one line.
note "6. every token refused: bounded authentications, exit 1 within read_timeout"
fake au authbad
echo secret >"$T/pw"
node a 2 --rdzv_conf=$SHORT,user=u,password_file=$T/pw
ends_within 6000 a 1 "invalid auth token"
n=$(count au /v3/auth/authenticate)
[ "$n" -le 20 ] || fail "$n authentications in one read_timeout (3 s)"
note "   $n authentications"

# 9a. A watch canceled as soon as it is created: reopened after pauses,
#     the reason said, the node gives up after read_timeout.
note "9a. a watch canceled at once: backoff, the real reason, exit 1"
fake wc canceled
node a 2 --rdzv_conf=$SHORT
ends_within 6000 a 1 "canceled this node's watch (.*future revision), again and again"
expect_nogrep "no compaction claimed" "compacted past" "$T/a.out"
n=$(count wc /v3/watch)
[ "$n" -le 20 ] || fail "$n watches opened in one read_timeout (3 s)"
note "   $n watches opened"

# 9b. "too many requests" for ever: retried after pauses, then exit 1.
note "9b. too many requests (HTTP 429): retried with backoff, exit 1 within read_timeout"
fake tm 429
node a 2 --rdzv_conf=$SHORT
ends_within 6000 a 1 "too many requests (retried for 3 s)"
n=$(wc -l <"$T/tm.log")
[ "$n" -le 20 ] || fail "$n requests in one read_timeout (3 s)"
note "   $n requests"
# ... with etcd_backoff=0.01,etcd_backoff_max=0.05 the pauses are those
#     (3 s / 50 ms: ~60 requests; the default pauses make 6).
note "9b'. HTTP 429 with etcd_backoff=0.01,etcd_backoff_max=0.05: shorter pauses"
fake tb 429
node a 2 --rdzv_conf=$SHORT,etcd_backoff=0.01,etcd_backoff_max=0.05
ends_within 6000 a 1 "too many requests (retried for 3 s)"
n=$(wc -l <"$T/tb.log")
[ "$n" -ge 20 ] || fail "$n requests in 3 s with pauses of at most 50 ms (want 20 or more)"
note "   $n requests"

# 9c. ... and for 2 s only: the job goes on and succeeds.
note "9c. too many requests for 2 s: the job succeeds"
fake tn 429 --for 2
"$CRUN" --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=etcd --rdzv_endpoint="127.0.0.1:$FPORT" \
	--rdzv_id=hostile --rdzv_conf=$SHORT "$FAKE_WORKER" exit 0 >"$T/b.out" 2>&1 &
pid_b=$!
at_exit "kill -9 $pid_b 2>/dev/null"
wait_pid 20 $pid_b "$T/b.out"
expect_eq "exit status after 2 s of 429" $? 0

# 8. Ranges answered with 12 MB of empty kvs ("[{},{},...]", 4 million of
#    them): refused before parsing; memory stays near the answer's size.
note "8. a range of 12 MB of empty kvs: refused, bounded memory"
fake in inflate --mb 12
/usr/bin/time -f "%M" -o "$T/rss" "$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=etcd \
	--rdzv_endpoint="127.0.0.1:$FPORT" --rdzv_id=hostile --rdzv_conf=$SHORT "$FAKE_WORKER" exit 0 >"$T/c.out" 2>&1 &
pid_c=$!
at_exit "kill -9 $pid_c 2>/dev/null"
ends_within 10000 c 1 "more than etcd_max_json_items JSON values"
rss=$(tail -1 "$T/rss")
[ "$rss" -le 120000 ] || fail "peak RSS $rss KiB for 12 MB answers"
note "   peak RSS $rss KiB"

# 8b. ... and of 12 MB of empty strings ('"", ' 3 million times): strings
#     cost the parser as much as objects, so they are refused the same way.
note "8b. a range of 12 MB of empty strings: refused, bounded memory"
fake is strings --mb 12
/usr/bin/time -f "%M" -o "$T/rss" "$CRUN" --nnodes=2 --nproc_per_node=1 --rdzv_backend=etcd \
	--rdzv_endpoint="127.0.0.1:$FPORT" --rdzv_id=hostile --rdzv_conf=$SHORT "$FAKE_WORKER" exit 0 >"$T/cs.out" 2>&1 &
pid_cs=$!
at_exit "kill -9 $pid_cs 2>/dev/null"
ends_within 10000 cs 1 "more than etcd_max_json_items JSON values"
rss=$(tail -1 "$T/rss")
[ "$rss" -le 120000 ] || fail "peak RSS $rss KiB for 12 MB answers of strings"
note "   peak RSS $rss KiB"

# 18b. A watch accepted and never answered (not even "created"): the node
#      cannot see the others' writes; it says so and gives up after
#      read_timeout (it timed out the join claiming "still missing 0").
note "18b. a silent watch: named, exit 1 after read_timeout"
fake sw silentwatch
"$CRUN" --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=etcd --rdzv_endpoint="127.0.0.1:$FPORT" \
	--rdzv_id=hostile --rdzv_conf=$SHORT "$FAKE_WORKER" exit 0 >"$T/d.out" 2>&1 &
pid_d=$!
at_exit "kill -9 $pid_d 2>/dev/null"
ends_within 10000 d 1 "never confirmed it (no answer in 2 s), again and again for 3 s"
expect_nogrep "no misleading join timeout" "still missing 0" "$T/d.out"

# 7. A lease too short to outlive one failover between members is named.
note "7. lease_ttl=1: a warning naming it"
fake nm normal
"$CRUN" --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=etcd --rdzv_endpoint="127.0.0.1:$FPORT" \
	--rdzv_id=short --rdzv_conf=last_call_timeout=1,lease_ttl=1 "$FAKE_WORKER" exit 0 >"$T/e.out" 2>&1 &
pid_e=$!
at_exit "kill -9 $pid_e 2>/dev/null"
wait_pid 20 $pid_e "$T/e.out"
expect_eq "exit status with lease_ttl=1" $? 0
expect_eq "one warning" "$(grep -c "warning: lease_ttl=1 s may not survive a failover" "$T/e.out")" 1

# The bounds are rdzv_conf keys: etcd_max_json_items=1 refuses the first
# answer of a healthy etcd (a lease grant holds 2 objects), naming the key.
note "etcd_max_json_items=1: the first answer is refused, naming the key"
"$CRUN" --nnodes=1:2 --nproc_per_node=1 --rdzv_backend=etcd --rdzv_endpoint="127.0.0.1:$FPORT" \
	--rdzv_id=items --rdzv_conf=last_call_timeout=1,etcd_max_json_items=1 "$FAKE_WORKER" exit 0 >"$T/f.out" 2>&1 &
pid_f=$!
at_exit "kill -9 $pid_f 2>/dev/null"
ends_within 10000 f 1 "more than etcd_max_json_items JSON values"
exit 0
