#!/bin/sh
# The store benchmark: one run drives three servers on loopback
# with build/tests/store_load (which speaks only the TCPStore wire protocol):
#
#   crun   $BUILD/crun store --port P           (skipped, and said so, if absent)
#   torch  PyTorch 1.13's own TCPStore server   ($PYTHON, default /usr/bin/python3)
#   floor  store_load null-server: answers at once, stores nothing
#
# (a) mix: set/get/add throughput at 1, 16 and 256 clients, one round trip in
#     flight per client, median of MIX_RUNS windows of MIX_SECONDS each, one
#     server instance per server, all up at once and measured in turns (crun,
#     torch, floor, crun, ...) so that a drift of the machine's speed falls
#     on every server alike. An op is one store API call of the cycle
#     set(k); get(k) = WAIT[k] + GET k; add(n, 1), as the 1.13 client sends it.
# (b) storm: N clients connect at once, ADD a barrier, WAIT on a go key that is
#     SET when the barrier reaches N; a fresh server for every run, servers in
#     turns, median of STORM_RUNS runs per server and N.
#
# Every figure, the ratios crun/floor and crun/torch, and the targets
# with PASS/MISS are printed. Exit status: 0 unless the bench itself broke;
# a missed target (MISS) fails too. Knobs: MIX_SECONDS, MIX_RUNS,
# MIX_CLIENTS, STORM_SIZES, STORM_RUNS, STORM_TIMEOUT, SERVERS ("crun torch
# floor").
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
LOAD="$BUILD/tests/store_load"
CRUN="$BUILD/crun"
MIX_SECONDS=${MIX_SECONDS:-2}
MIX_RUNS=${MIX_RUNS:-5}
MIX_CLIENTS=${MIX_CLIENTS:-"1 16 256"}
STORM_SIZES=${STORM_SIZES:-"4096 8192 16000"}
STORM_RUNS=${STORM_RUNS:-3}
STORM_TIMEOUT=${STORM_TIMEOUT:-60}
SERVERS=${SERVERS:-"crun torch floor"}

if [ ! -x "$LOAD" ]; then
	echo "store bench: $LOAD is not built (make BUILD=$BUILD check-build)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/crun-store-bench.XXXXXX") || exit 1
RES="$tmp/results"
: >"$RES"
server_pid=""
mix_pids=""
broken=0

cleanup() {
	for p in $server_pid $mix_pids; do
		kill "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# The servers and the generator each need one descriptor per client.
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# Ports below the ephemeral range, a fresh one for every server start.
port=$((20000 + ($$ % 500) * 20))
next_port() { port=$((port + 1)); }

# start_server NAME: start server NAME on a fresh $port; wait until it says it
# listens. Returns non-zero (and prints why) if it does not come up.
start_server() {
	next_port
	log="$tmp/$1.$port.log"
	case $1 in
	crun)
		"$CRUN" store --port "$port" >"$log" 2>&1 &
		;;
	torch)
		"$PYTHON" -c '
import sys, time
from datetime import timedelta
import torch.distributed as dist
s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), None, True,
                  timedelta(seconds=300), wait_for_workers=False)
print("torch store: listening on 127.0.0.1:%d" % s.port, file=sys.stderr, flush=True)
while True:
    time.sleep(3600)
' "$port" >"$log" 2>&1 &
		;;
	floor)
		"$LOAD" null-server --port "$port" >"$log" 2>&1 &
		;;
	esac
	server_pid=$!
	i=0
	while [ $i -lt 300 ]; do
		if grep -q "listening on" "$log" 2>/dev/null; then
			return 0
		fi
		if ! kill -0 "$server_pid" 2>/dev/null; then
			wait "$server_pid" 2>/dev/null
			server_pid=""
			echo "   $1: server exited before listening: $(tail -n 2 "$log" | tr '\n' ' ')"
			return 1
		fi
		sleep 0.1
		i=$((i + 1))
	done
	echo "   $1: server not listening after 30 s"
	stop_server
	return 1
}

stop_server() {
	[ -n "$server_pid" ] || return 0
	kill "$server_pid" 2>/dev/null
	wait "$server_pid" 2>/dev/null
	server_pid=""
}

# field NAME LINE: the value of NAME=... in a store_load output line.
field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }

# get KIND SERVER N FIELD: a recorded result, or empty.
get() { awk -v k="$1" -v s="$2" -v n="$3" -v f="$4" \
	'$1 == k && $2 == s && $3 == n { for (i = 4; i <= NF; i++) { split($i, a, "="); if (a[1] == f) print a[2] } }' "$RES"; }

avail=""
for s in $SERVERS; do
	case $s in
	crun)
		if [ ! -x "$CRUN" ]; then
			echo "store bench: $CRUN is not built, skipping crun"
			continue
		fi
		;;
	torch)
		if ! "$PYTHON" -c 'import torch.distributed' 2>/dev/null; then
			echo "store bench: $PYTHON has no torch.distributed, skipping torch"
			continue
		fi
		;;
	esac
	avail="$avail $s"
done

echo "== store bench: mix (op = set | get = WAIT+GET | add; median of $MIX_RUNS x ${MIX_SECONDS}s, servers in turns)"
up=""
for s in $avail; do
	if ! start_server "$s"; then
		echo "   $s: skipped"
		continue
	fi
	up="$up $s"
	eval "port_$s=$port"
	mix_pids="$mix_pids $server_pid"
	server_pid=""
done
# median FILE: the middle line of a file of numbers.
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }'; }
for c in $MIX_CLIENTS; do
	for s in $up; do : >"$tmp/mix.$s.$c"; done
	r=0
	while [ $r -lt "$MIX_RUNS" ]; do
		for s in $up; do
			eval "p=\$port_$s"
			out=$("$LOAD" mix --port "$p" --clients "$c" --seconds "$MIX_SECONDS" \
				--runs 1 2>"$tmp/gen.err" | tail -n 1)
			ops=$(field ops_per_s "$out")
			if [ -z "$ops" ]; then
				echo "   $s clients=$c: FAILED $(head -n 1 "$tmp/gen.err")"
				broken=1
				continue
			fi
			echo "$ops" >>"$tmp/mix.$s.$c"
		done
		r=$((r + 1))
	done
	for s in $up; do
		ops=$(median "$tmp/mix.$s.$c")
		[ -n "$ops" ] || continue
		echo "   $s mix clients=$c runs=$(wc -l <"$tmp/mix.$s.$c") ops_per_s=$ops" \
			"(each: $(sort -n "$tmp/mix.$s.$c" | tr '\n' ' '))"
		echo "mix $s $c ops_per_s=$ops" >>"$RES"
	done
done
for p in $mix_pids; do
	kill "$p" 2>/dev/null
	wait "$p" 2>/dev/null
done
mix_pids=""
avail=$up

echo "== store bench: connect storm (a fresh server each run, servers in turns, median of $STORM_RUNS)"
for n in $STORM_SIZES; do
	for s in $avail; do : >"$tmp/storm.$s.$n"; done
	r=0
	while [ $r -lt "$STORM_RUNS" ]; do
		for s in $avail; do
			start_server "$s" || continue
			out=$(timeout $((STORM_TIMEOUT + 15)) "$LOAD" storm --port "$port" --clients "$n" \
				--timeout "$STORM_TIMEOUT" 2>"$tmp/gen.err" | tail -n 1)
			stop_server
			secs=$(field seconds "$out")
			if [ -z "$secs" ] || [ -n "$(field error "$out")" ]; then
				echo "   $s clients=$n: FAILED $(head -n 1 "$tmp/gen.err")"
				echo "$STORM_TIMEOUT $n" >>"$tmp/storm.$s.$n"
				continue
			fi
			echo "   $s $out"
			echo "$secs $(($(field failed "$out") + $(field unfinished "$out")))" >>"$tmp/storm.$s.$n"
		done
		r=$((r + 1))
	done
	for s in $avail; do
		[ -s "$tmp/storm.$s.$n" ] || continue
		secs=$(median "$tmp/storm.$s.$n")
		fail=$(awk '{ f += $2 } END { print f + 0 }' "$tmp/storm.$s.$n")
		echo "storm $s $n seconds=$secs failed=$fail" >>"$RES"
	done
done

# ratio A B: A/B with two decimals, or "-" if either is missing.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "" || b == "" || b + 0 == 0) print "-"; else printf "%.2f\n", a / b }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 >= b + 0) }'; }

echo "== store bench: summary"
echo "mix ops/s"
printf '   %-8s %10s %10s %10s %11s %11s\n' clients crun torch floor crun/floor crun/torch
for c in $MIX_CLIENTS; do
	cr=$(get mix crun "$c" ops_per_s)
	to=$(get mix torch "$c" ops_per_s)
	fl=$(get mix floor "$c" ops_per_s)
	printf '   %-8s %10s %10s %10s %11s %11s\n' "$c" "${cr:--}" "${to:--}" "${fl:--}" \
		"$(ratio "$cr" "$fl")" "$(ratio "$cr" "$to")"
done
echo "storm seconds (failed connections)"
printf '   %-8s %16s %16s %16s\n' clients crun torch floor
for n in $STORM_SIZES; do
	line=""
	for s in crun torch floor; do
		t=$(get storm "$s" "$n" seconds)
		f=$(get storm "$s" "$n" failed)
		if [ -n "$t" ]; then
			line="$line $(printf '%16s' "$t ($f)")"
		else
			line="$line $(printf '%16s' -)"
		fi
	done
	printf '   %-8s%s\n' "$n" "$line"
done

# One machine-readable line per figure (docs/performance.md names them).
for c in $MIX_CLIENTS; do
	cr=$(get mix crun "$c" ops_per_s) to=$(get mix torch "$c" ops_per_s) fl=$(get mix floor "$c" ops_per_s)
	echo "RESULT store.mix_$c crun_ops=${cr:-} torch_ops=${to:-} floor_ops=${fl:-} crun_floor=$(ratio "$cr" "$fl") crun_torch=$(ratio "$cr" "$to")"
done
for n in $STORM_SIZES; do
	echo "RESULT store.storm_$n crun_s=$(get storm crun "$n" seconds) crun_failed=$(get storm crun "$n" failed) torch_s=$(get storm torch "$n" seconds) torch_failed=$(get storm torch "$n" failed) floor_s=$(get storm floor "$n" seconds)"
done

misses=0
# verdict TEXT OK: print a target with PASS/MISS (n/a when crun did not run).
verdict() {
	if ! echo " $avail " | grep -q " crun "; then
		printf '   %-66s n/a (crun store not available)\n' "$1"
	elif [ "$2" = 1 ]; then
		printf '   %-66s PASS\n' "$1"
	else
		printf '   %-66s MISS\n' "$1"
		misses=$((misses + 1))
	fi
}
ok() { if "$@"; then echo 1; else echo 0; fi; }

echo "targets"
for c in 16 256; do
	cr=$(get mix crun "$c" ops_per_s)
	fl=$(get mix floor "$c" ops_per_s)
	floor95=$(awk -v f="$fl" 'BEGIN { if (f != "") printf "%.0f\n", f * 0.95 }')
	verdict "mix $c clients: crun >= 95% of floor ($(ratio "$cr" "$fl"))" "$(ok ge "$cr" "$floor95")"
done
cr=$(get mix crun 1 ops_per_s)
to=$(get mix torch 1 ops_per_s)
verdict "mix 1 client: crun >= torch ($(ratio "$cr" "$to"))" "$(ok ge "$cr" "$to")"
big=$(echo "$STORM_SIZES" | tr ' ' '\n' | sed '/^$/d' | tail -n 1)
small=$(echo "$STORM_SIZES" | tr ' ' '\n' | sed '/^$/d' | head -n 1)
t=$(get storm crun "$big" seconds)
verdict "storm $big clients: crun <= 2 s (${t:--} s)" "$(ok ge 2 "$t")"
tf=$(get storm floor "$big" seconds)
tf125=$(awk -v f="$tf" 'BEGIN { if (f != "") printf "%.3f\n", f * 1.25 }')
verdict "storm $big clients: crun within 1.25x of floor ($(ratio "$t" "$tf")x)" "$(ok ge "$tf125" "$t")"
nf=0
for n in $STORM_SIZES; do
	f=$(get storm crun "$n" failed)
	[ "${f:-1}" = 0 ] || nf=$((nf + 1))
done
verdict "storm: crun 0 failed connections at every N" "$([ $nf = 0 ] && echo 1 || echo 0)"
# Linear: the time per client at the largest N is at most 1.5x that at the smallest.
ts=$(get storm crun "$small" seconds)
growth=$(awk -v a="$t" -v b="$ts" -v na="$big" -v nb="$small" \
	'BEGIN { if (a == "" || b == "" || b + 0 == 0) print ""; else printf "%.2f\n", (a / na) / (b / nb) }')
verdict "storm: crun grows linearly (per-client time x${growth:--} from $small to $big, <= 1.5)" \
	"$(ok ge 1.5 "$growth")"

if [ $broken -ne 0 ]; then
	echo "store bench: some measurements failed"
	exit 1
fi
if [ $misses -ne 0 ]; then
	echo "store bench: $misses stated target(s) missed (MISS above)"
	exit 1
fi
exit 0
