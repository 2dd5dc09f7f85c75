#!/bin/sh
# The etcd rendezvous benchmark, beside c10d in the same run:
#   (a) N agents on loopback (one /bin/true worker each, last_call_timeout
#       LAST_CALL) from the start of the first agent to the exit of the last,
#       for N in SIZES, with --rdzv_backend=etcd (one etcd 3.4 member, data
#       on tmpfs) and with --rdzv_backend=c10d; median of RUNS;
#   (b) re-forming after the loss of group rank 0: 3 agents (--nnodes=2:3,
#       lease_ttl LEASE_TTL s) whose workers hang on attempt 0; kill -9 of
#       the agent that is group rank 0; time until both survivors exited 0
#       (etcd). With c10d that agent hosts the store and the job ends: its
#       time to the survivors' non-zero exit is printed beside it.
# One "RESULT etcd.<figure> key=value..." line per figure. Exit status 0
# unless an etcd run failed or hung (c10d failures are counted beside its
# figure). Knobs: SIZES RUNS LAST_CALL LEASE_TTL.
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
SIZES=${SIZES-"16 64"}
RUNS=${RUNS:-3}
LAST_CALL=${LAST_CALL:-1}
LEASE_TTL=${LEASE_TTL:-2}
ETCD=${ETCD:-/usr/bin/etcd}
root=$(cd "$(dirname "$0")/../.." && pwd)
CRUN="$root/$BUILD/crun"
FW="$root/$BUILD/tests/fake_worker"
[ -x "$CRUN" ] && [ -x "$FW" ] || { echo "etcd bench: build first (make check-build)" >&2; exit 1; }
[ -x "$ETCD" ] || { echo "etcd bench: no $ETCD (apt-get install etcd-server)" >&2; exit 1; }

tmp=$(mktemp -d /dev/shm/crun-etcd-bench.XXXXXX 2>/dev/null || mktemp -d "${TMPDIR:-/tmp}/crun-etcd-bench.XXXXXX") || exit 1
pids=""
cleanup() { [ -n "$pids" ] && kill -9 $pids 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM HUP PIPE
free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
now_ms() { date +%s%3N; }
median() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

cp=$(free_port) pp=$(free_port)
"$ETCD" --name b1 --data-dir "$tmp/etcd" --listen-client-urls "http://127.0.0.1:$cp" \
	--advertise-client-urls "http://127.0.0.1:$cp" --listen-peer-urls "http://127.0.0.1:$pp" \
	--initial-advertise-peer-urls "http://127.0.0.1:$pp" --initial-cluster "b1=http://127.0.0.1:$pp" \
	>"$tmp/etcd.log" 2>&1 &
epid=$!; pids="$epid"
i=0; until curl -sf -X POST -d '{}' "http://127.0.0.1:$cp/v3/maintenance/status" >/dev/null; do
	i=$((i+1)); [ $i -lt 100 ] || { tail "$tmp/etcd.log" >&2; echo "etcd bench: etcd did not start" >&2; exit 1; }
	sleep 0.1
done
EP="127.0.0.1:$cp"
status=0

# group BACKEND N ID: start N agents, wait for all; prints the ms taken.
group() {
	_b=$1 _n=$2 _id=$3 _ep=$EP _ap=""
	[ "$_b" = c10d ] && _ep="127.0.0.1:$(free_port)"
	_t0=$(now_ms) _k=0
	while [ $_k -lt "$_n" ]; do
		"$CRUN" --nnodes="$_n" --nproc_per_node=1 --rdzv_backend="$_b" --rdzv_endpoint="$_ep" \
			--rdzv_id="$_id" --rdzv_conf=last_call_timeout=$LAST_CALL,join_timeout=120 \
			--log_dir=/dev/null /bin/true >>"$tmp/$_id.log" 2>&1 &
		_ap="$_ap $!"
		_k=$((_k+1))
	done
	pids="$epid $_ap"
	_bad=0
	for _p in $_ap; do wait "$_p" || _bad=1; done
	_t1=$(now_ms)
	pids="$epid"
	[ $_bad = 0 ] || { echo "etcd bench: a $_b agent of $_id failed:" >&2; tail -n 5 "$tmp/$_id.log" >&2; return 1; }
	echo $((_t1 - _t0))
}

for n in $SIZES; do
	for b in etcd c10d; do
		all=""
		r=0
		fails=0
		while [ $r -lt "$RUNS" ]; do
			if ms=$(group $b "$n" "g$b$n-$r"); then
				all="$all $ms"
			else
				# etcd failing is this bench failing; c10d's failures
				# are reported beside its figure.
				fails=$((fails+1))
				[ $b = etcd ] && status=1
			fi
			r=$((r+1))
		done
		med=$(echo "$all" | median)
		echo "rendezvous of $n agents, $b: median ${med:-none} ms (runs:$all$( [ $fails -gt 0 ] && echo "; $fails of $RUNS failed"))"
		echo "RESULT etcd.group_${b} n=$n median_ms=$med runs=$RUNS"
	done
done

# reform BACKEND ID: 3 agents, kill -9 group rank 0, wait for the others.
reform() {
	_b=$1 _id=$2 _ep=$EP _ap=""
	[ "$_b" = c10d ] && _ep="127.0.0.1:$(free_port)"
	for x in a b c; do
		"$CRUN" --nnodes=2:3 --nproc_per_node=1 --rdzv_backend="$_b" --rdzv_endpoint="$_ep" \
			--rdzv_id="$_id" --rdzv_conf=last_call_timeout=$LAST_CALL,join_timeout=30,lease_ttl=$LEASE_TTL \
			--log_dir=/dev/null "$FW" hang-if-attempt 0 >"$tmp/$_id.$x" 2>&1 &
		eval "_p_$x=$!"; _ap="$_ap $!"
		[ "$_b" = c10d ] && [ $x = a ] && sleep 0.3
	done
	pids="$epid $_ap"
	_i=0
	until grep -l "group rank 0 of 3" "$tmp/$_id".? >/dev/null 2>&1; do
		_i=$((_i+1)); [ $_i -lt 300 ] || { echo "etcd bench: $_id never formed" >&2; return 1; }
		sleep 0.1
	done
	sleep 0.3
	_g=$(grep -l "group rank 0 of 3" "$tmp/$_id".? | head -1); _g=${_g##*.}
	eval "kill -9 \$_p_$_g"
	_t0=$(now_ms) _rc=0
	for x in a b c; do [ $x = $_g ] || { eval "wait \$_p_$x" || _rc=$?; }; done
	_t1=$(now_ms)
	pids="$epid"
	echo "$((_t1 - _t0)) $_rc"
}
for b in etcd c10d; do
	all="" rcs=""
	r=0
	while [ $r -lt "$RUNS" ]; do
		set -- $(reform $b "rf$b-$r") || { status=1; break; }
		all="$all $1" rcs="$rcs $2"
		r=$((r+1))
	done
	med=$(echo "$all" | median)
	if [ $b = etcd ]; then
		echo "re-form after kill -9 of group rank 0, etcd (lease_ttl $LEASE_TTL s): survivors done in median $med ms (runs:$all; exit statuses:$rcs)"
		case "$rcs" in *[1-9]*) echo "etcd bench: etcd survivors failed" >&2; status=1 ;; esac
	else
		echo "the same kill with c10d: the job ends; survivors exit in median $med ms (exit statuses:$rcs)"
	fi
	echo "RESULT etcd.reform_${b} median_ms=$med lease_ttl=$LEASE_TTL runs=$RUNS"
done
exit $status
