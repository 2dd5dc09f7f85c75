#!/bin/sh
# crun, built on this host, with Debian 13's own PyTorch (python3-torch
# 2.6.0+dfsg), which is built without libuv: such a torch refuses
# use_libuv=True, for a TCPStore client too, and its env:// rendezvous asks
# for it by default. The jobs run in a trixie root (scripts/debian-root.sh,
# built once per machine and cached in /var/cache/crun-roots), each node in
# PID and mount namespaces of its own (scripts/debian-root-run.sh), all on
# the host's loopback:
#   a. --standalone, 2 workers: gloo init_process_group(env://), all_reduce,
#      DDP, new_group, object collectives (ddp_gloo.py)
#   b. two agents (2 + 1 workers) in a c10d rendezvous on 127.0.0.1
#   c. a worker that fails on attempt 0, --max_restarts=1: attempt 1 succeeds
#   d. --nnodes=1:2, two agents (2 + 1 workers) past init_process_group; node
#      b is killed whole (kill -9 of its runner: the kernel kills its PID
#      namespace, agent and workers at once, as a machine lost); a re-forms
#      alone and its 2 workers finish (relay_hold.py)
# Each case checks the exit statuses, every rank's result, and that no
# output but crun's own lines says "libuv"; a failed case does not stop the others, the suite
# fails naming them all. At the end no process of any node is left, and no
# mount of the runs is seen on the host. It brings its own interpreter (the
# root's /usr/bin/python3), so it runs once, not once per TORCH_PYTHONS.
. tests/integration/lib.sh
need_root "debootstrap, namespaces and chroot"
[ -x "$CRUN" ] || fail "no crun at $CRUN (make BUILD=$BUILD)"

ROOT=$(sh scripts/debian-root.sh trixie) || fail "could not make the trixie root (scripts/debian-root.sh trixie)"
note "root $ROOT: $(grep '^python3-torch' "$ROOT/.crun-root" | tr '\t' ' ')"

# crun's shared libraries that the root lacks (none for the plain build,
# which needs only libc; the sanitizers' runtimes under make asan) are bound
# at their host paths.
BINDS="-b $TOP"
case $CRUN in "$TOP"/*) ;; *) BINDS="$BINDS -b $CRUN" ;; esac
for lib in $(ldd "$CRUN" | sed -n 's/^.* => \(\/[^ ]*\) .*$/\1/p'); do
	[ -e "$ROOT$lib" ] || [ -e "$ROOT/usr$lib" ] || { BINDS="$BINDS -b $lib"; note "host library bound in: $lib"; }
done
ENVS="-e PYTHON=/usr/bin/python3"
for v in ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS; do
	eval "_val=\${$v:-}"
	[ -z "$_val" ] || ENVS="$ENVS -e $v=$_val"
done

# spawn NODE LOG CMD...: CMD in the root, in the background, as node NODE
# (marked with CRUN_TEST_NODE, which crun passes on to its workers), output
# to LOG; $spawned is the runner's pid (kill -KILL of it ends the node
# whole). Paths are the host's: the checkout and $T are bound at their own.
spawn() {
	_node=$1 _log=$2; shift 2
	# shellcheck disable=SC2086
	(exec sh "$TOP/scripts/debian-root-run.sh" $BINDS -b "$T" -C "$TOP" $ENVS \
		-e "CRUN_TEST_NODE=$T/$_node" "$ROOT" "$@") >"$_log" 2>&1 &
	spawned=$!
	at_exit "kill -KILL $spawned"
}
# left NODE: pids of processes still marked as NODE (any node: "").
left() {
	for _e in /proc/[0-9]*/environ; do
		{ tr '\0' '\n' <"$_e"; } 2>/dev/null | grep -q "^CRUN_TEST_NODE=$T/${1:-}" &&
			{ _p=${_e#/proc/}; echo "${_p%/environ}"; }
	done
}
# no_libuv CASE FILE...: no output of the workers (or of anything but
# crun's own lines, which may say which store it chose and why) names libuv.
no_libuv() {
	_c=$1; shift
	for _f; do
		grep -v '^crun: ' "$_f" >"$_f.nocrun"
		expect_nogrep "$_c: no libuv error" "libuv" "$_f.nocrun"
	done
}
# status CASE PID WANT LOG
status() {
	wait_pid "${5:-120}" "$2" "$4"; _rc=$?
	[ "$_rc" = "$3" ] || { tail -n 40 "$4" >&2; fail "$1: exited $_rc, want $3 ($4)"; }
}
# ranks CASE DIR WORLD ATTEMPT: every rank of ddp_gloo.py got the right
# answers. The store may be crun's agent store or rank 0's own (crun picks
# what this torch can use): either is accepted.
ranks() {
	_w=$3 _want=$(( $3 * ($3 + 1) / 2 ))
	_r=0
	while [ $_r -lt "$_w" ]; do
		expect_grep "$1: rank $_r" "^rank $_r/$_w attempt $4 sum $_want want $_want replicas_equal True store [A-Za-z]* new_group ok objects ok store_server [a-z]*$" "$2/rank.$_r"
		_r=$((_r + 1))
	done
	note "$1: $_w ranks right ($(sed -n 's/^.* store \([A-Za-z]*\) .* store_server \([a-z]*\)$/agent store \1, rank 0 store server: \2/p' "$2/rank.0"))"
}

# a. One node, two workers.
case_a() {
	mkdir -p "$T/a"
	spawn a "$T/a.out" "$CRUN" --standalone --nproc_per_node=2 tests/integration/py/ddp_gloo.py --out "$T/a"
	wait_pid 120 $spawned "$T/a.out"; _rc=$?
	no_libuv "a. standalone" "$T/a.out"
	[ $_rc = 0 ] || { tail -n 40 "$T/a.out" >&2; fail "a. standalone: exited $_rc, want 0"; }
	ranks "a. standalone" "$T/a" 2 0
}

# b. Two agents, 2 + 1 workers, meeting on loopback.
case_b() {
	mkdir -p "$T/b"
	PORT=$(free_port)
	set -- --nnodes=2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=trixie-b \
		--rdzv_conf=join_timeout=60
	spawn b0 "$T/b0.out" "$CRUN" "$@" --nproc_per_node=2 tests/integration/py/ddp_gloo.py --out "$T/b"
	_p0=$spawned
	wait_for 20 listening "$PORT" || { cat "$T/b0.out" >&2; fail "b. two nodes: the first agent never listened on $PORT"; }
	spawn b1 "$T/b1.out" "$CRUN" "$@" --nproc_per_node=1 tests/integration/py/ddp_gloo.py --out "$T/b"
	_p1=$spawned
	wait_pid 120 $_p0 "$T/b0.out"; _rc0=$?
	wait_pid 120 $_p1 "$T/b1.out"; _rc1=$?
	no_libuv "b. two nodes" "$T/b0.out" "$T/b1.out"
	[ $_rc0 = 0 ] || { tail -n 40 "$T/b0.out" >&2; fail "b. two nodes: the first agent exited $_rc0, want 0"; }
	[ $_rc1 = 0 ] || { tail -n 40 "$T/b1.out" >&2; fail "b. two nodes: the second agent exited $_rc1, want 0"; }
	ranks "b. two nodes" "$T/b" 3 0
}

# c. Local rank 0 exits 3 on attempt 0; attempt 1 succeeds.
case_c() {
	mkdir -p "$T/c"
	spawn c "$T/c.out" "$CRUN" --standalone --nproc_per_node=2 --max_restarts=1 \
		tests/integration/py/ddp_gloo.py --out "$T/c" --fail-on-attempt 0
	wait_pid 120 $spawned "$T/c.out"; _rc=$?
	no_libuv "c. restart" "$T/c.out"
	[ $_rc = 0 ] || { tail -n 40 "$T/c.out" >&2; fail "c. restart: exited $_rc, want 0"; }
	expect_grep "c. restart: restarted once" "restart 1 of 1" "$T/c.out"
	ranks "c. restart" "$T/c" 2 1
}

# d. A node lost while its workers run; the other re-forms alone. Round 0
# may form before b joins (a alone is enough for 1:2): b's arrival then
# makes the next round, with both. relay_hold.py's workers stay after their
# all_reduce (round 0: they hang; later rounds: until DIR/go, at most 60 s).
case_d() {
	D=$T/d
	mkdir -p "$D"
	PORT=$(free_port)
	set -- --nnodes=1:2 --rdzv_backend=c10d --rdzv_endpoint="127.0.0.1:$PORT" --rdzv_id=trixie-d \
		--rdzv_conf=last_call_timeout=2,join_timeout=60
	spawn da "$T/da.out" "$CRUN" "$@" --nproc_per_node=2 tests/integration/py/relay_hold.py --dir "$D" \
		--hang-on-attempt 0
	_pa=$spawned
	wait_for 20 listening "$PORT" || { cat "$T/da.out" >&2; fail "d. node loss: node a never listened on $PORT"; }
	spawn db "$T/db.out" "$CRUN" "$@" --nproc_per_node=1 tests/integration/py/relay_hold.py --dir "$D" \
		--hang-on-attempt 0
	_pb=$spawned
	# in_round W N: ranks 0..N-1 are in one round of world W (its attempt
	# in $_k).
	in_round() {
		_k=$(sed -n "s/^attempt \([0-9]*\) world $1 .*/\1/p" "$D/ready.0" 2>/dev/null)
		[ -n "$_k" ] || return 1
		_r=1
		while [ $_r -lt "$2" ]; do
			grep -q "^attempt $_k world $1 " "$D/ready.$_r" 2>/dev/null || return 1
			_r=$((_r + 1))
		done
	}
	_both() { in_round 3 3 || { exited $_pa && exited $_pb; }; }
	wait_for 120 _both
	no_libuv "d. node loss" "$T/da.out" "$T/db.out"
	in_round 3 3 || { tail -n 30 "$T/da.out" "$T/db.out" >&2; fail "d. node loss: no round got its 3 ranks through init_process_group"; }
	k=$_k
	note "d. node loss: round $k has both nodes"
	kill -KILL $_pb
	status "d. node loss: node b, killed" $_pb 137 "$T/db.out" 10
	_gone() { [ -z "$(left db)" ]; }
	wait_for 5 _gone || fail "d. node loss: processes of node b left after its kill: $(left db)"
	_alone() { { in_round 2 2 && [ "$_k" -gt "$k" ]; } || exited $_pa; }
	wait_for 120 _alone
	in_round 2 2 && [ "$_k" -gt "$k" ] || { tail -n 30 "$T/da.out" >&2; fail "d. node loss: node a never re-formed"; }
	k=$_k
	touch "$D/go"
	status "d. node loss: node a" $_pa 0 "$T/da.out"
	no_libuv "d. node loss" "$T/da.out" "$T/db.out"
	for _r in 0 1; do
		expect_grep "d. node loss: rank $_r finished" "^rank $_r/2 attempt $k sum 3 want 3 count 2$" "$D/done.$_r"
	done
	note "d. node loss: node b killed, node a re-formed alone (round $k) and finished"
}

# Each case in a subshell: its failure (lib.sh's fail exits) is recorded and
# the next case still runs; each kills what it started when it ends.
failed=""
for c in a b c d; do
	_s=$(now_ms)
	(
		trap 'eval "$_cleanups" >/dev/null 2>&1' EXIT
		trap 'exit 130' INT TERM
		"case_$c"
	) || failed="$failed $c"
	note "$c: $(( ($(now_ms) - _s) / 1000 )) s"
done

_none() { [ -z "$(left)" ]; }
wait_for 5 _none || fail "processes of the runs left: $(left)"
expect_nogrep "no mount of the runs on the host" "debian-root-run\|$ROOT" /proc/self/mountinfo
[ -z "$failed" ] || fail "failed cases:$failed"
exit 0
