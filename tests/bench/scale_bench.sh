#!/bin/sh
# The scale curves (tests/bench/rdzv_sim, tests/bench/relay_sim): the
# workers' store initialising N simulated ranks (crun store beside a
# do-nothing floor server, same clients, same run), the same store behind
# per-node relays (8 ranks a node, many relays per process, one connection
# per node at the store; its floor: the same clients against do-nothing
# servers), and the c10d rendezvous of N simulated nodes (forming, a steady
# state, re-forming after a node is killed). Writes docs/scale.csv and plots
# seconds against N per curve to docs/scale.svg (gnuplot), then prints the
# targets with PASS / MISS / UNMEASURED.
#
# It takes minutes and opens up to 2 x N connections, so `make bench` runs it
# only with BENCH_SCALE=1; `make bench-scale` does. Knobs: WORKER_SIZES,
# RELAY_SIZES, RELAY_RUNS (3: the relay curve's medians), RDZV_SIZES,
# SCALE_OUT (default docs), SCALE_PROCS (rdzv_sim's client processes, 2;
# relay_sim spreads its clients and relays over one process per 8192 ranks
# and per 1024 nodes).
# A size that needs more descriptors in one process than RLIMIT_NOFILE allows
# (and cannot be raised: no CAP_SYS_RESOURCE) is skipped and said so.
# Exit status: 0 unless the simulator broke or a measured target was missed.
BUILD=${BUILD:-build}
SIM="$BUILD/tests/rdzv_sim"
LOAD="$BUILD/tests/store_load"
RELAY="$BUILD/tests/relay_sim"
CRUN="$BUILD/crun"
OUT=${SCALE_OUT:-docs}
WORKER_SIZES=${WORKER_SIZES:-"1024 4096 8192 16384 32768 65536 131072"}
RELAY_SIZES=${RELAY_SIZES:-"8192 16384 32768 65536 131072"}
RELAY_RUNS=${RELAY_RUNS:-3}
RDZV_SIZES=${RDZV_SIZES:-"256 1024 2048 4096 8192 16384"}
PROCS=${SCALE_PROCS:-2}

if [ "${BENCH_SCALE:-0}" != 1 ]; then
	echo "scale bench: skipped (minutes, up to 2N connections): run it with" \
		"make bench-scale or BENCH_SCALE=1 make bench"
	exit 0
fi
for b in "$SIM" "$LOAD" "$RELAY" "$CRUN"; do
	[ -x "$b" ] || { echo "scale bench: $b is not built (make check-build)" >&2; exit 1; }
done
mkdir -p "$OUT"
csv="$OUT/scale.csv"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crun-scale-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP
broken=0

commas() { echo "$1" | tr ' ' ','; }
# rdzv_sim's rows have the first 9 columns; relay_sim's all 14.
pad() { awk -F, -v OFS=, '{ for (i = NF + 1; i <= 14; i++) $i = ""; print }'; }
{
	echo "# crun scale curves (tests/bench/scale_bench.sh), $(date -u +%Y-%m-%dT%H:%MZ)," \
		"$(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)," \
		"RLIMIT_NOFILE $(ulimit -Hn), load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "curve,N,seconds,floor_seconds,ops_per_round,bytes_per_node,host_cpu_pct,host_rss_mb,load1,store_conns,store_reqs_per_rank,store_cpu_us_per_rank,relay_cpu_us_per_node,relay_rss_kb_per_node"
} >"$tmp/csv"
echo "=== workers' store: $WORKER_SIZES ranks"
"$SIM" workers --crun "$CRUN" --floor "$LOAD" --procs "$PROCS" \
	--sizes "$(commas "$WORKER_SIZES")" --timeout 120 >"$tmp/w.csv" 2>"$tmp/w.err" || broken=1
pad <"$tmp/w.csv" >>"$tmp/csv"
grep -v unauthenticated "$tmp/w.err" >&2
if [ -n "$RELAY_SIZES" ]; then
	echo "=== workers' store behind per-node relays: $RELAY_SIZES ranks, 8 per node"
	"$RELAY" --floor "$LOAD" --per-node 8 --sizes "$(commas "$RELAY_SIZES")" --runs "$RELAY_RUNS" \
		--timeout 120 >>"$tmp/csv" 2>"$tmp/x.err" || broken=1
	cat "$tmp/x.err" >&2
else
	: >"$tmp/x.err"
fi
echo "=== rendezvous: $RDZV_SIZES nodes"
"$SIM" rdzv --procs "$PROCS" --sizes "$(commas "$RDZV_SIZES")" --steady 5 \
	--timeout 120 >"$tmp/r.csv" 2>"$tmp/r.err" || broken=1
pad <"$tmp/r.csv" >>"$tmp/csv"
grep -v unauthenticated "$tmp/r.err" >&2
# Where the relay curve's CPU went, per N, as comments at the end.
sed -n 's/^relay_sim: \(N=.*CPU s:.*\)/# relay CPU, \1/p' "$tmp/x.err" >>"$tmp/csv" 2>/dev/null
cp "$tmp/csv" "$csv"
cat "$csv"

# The plot: seconds against N, log-log, one line per curve.
# Columns 2-4: N, seconds, floor seconds; 5: the store host's CPU seconds
# (what the round costs the host, apart from the simulated nodes' own CPU,
# which on a real cluster is spread over N machines).
for c in workers relay rdzv-form rdzv-reform; do
	awk -F, -v c="$c" '$1 == c { print $2, $3, ($4 == "" ? "NaN" : $4), $3 * $7 / 100 }' \
		"$csv" >"$tmp/$c.dat"
done
if command -v gnuplot >/dev/null 2>&1; then
	gnuplot <<GP || broken=1
set terminal svg size 720,440 dynamic font "sans,11"
set output "$OUT/scale.svg"
set title "crun at scale, simulated on one $(nproc)-core machine"
set logscale xy 2
set xlabel "N (ranks for the workers' store, nodes for the rendezvous)"
set ylabel "seconds (load average in docs/scale.csv)"
set format y "%g"
set key top left Left reverse font ",9"
set grid
plot "$tmp/workers.dat" using 1:2 with linespoints title "workers' store init, crun store", \
     "$tmp/workers.dat" using 1:3 with linespoints dashtype 2 title "workers' store init, do-nothing floor", \
     "$tmp/relay.dat" using 1:2 with linespoints title "workers' store init through per-node relays (8 ranks a node)", \
     "$tmp/relay.dat" using 1:3 with linespoints dashtype 2 title "relays' floor: the same clients, do-nothing servers", \
     "$tmp/rdzv-form.dat" using 1:2 with linespoints title "rendezvous: round formed", \
     "$tmp/rdzv-reform.dat" using 1:2 with linespoints title "node lost: detected and re-formed", \
     "$tmp/rdzv-form.dat" using 1:4 with linespoints dashtype 3 title "rendezvous: store host CPU seconds"
GP
	echo "plot: $OUT/scale.svg"
else
	echo "scale bench: no gnuplot (apt-get install gnuplot-nox): no plot" >&2
fi

# Targets, judged at their own N; an N that was not reached is UNMEASURED.
val() { awk -F, -v c="$1" -v n="$2" -v f="$3" '$1 == c && $2 == n { print $f }' "$csv"; }
missed=0
target() { # NAME CURVE N FIELD BOUND [<]: the value <= BOUND (or < BOUND)
	v=$(val "$2" "$3" "$4")
	op=${6:-"<="}
	if [ -z "$v" ]; then
		echo "TARGET $1: UNMEASURED (N=$3 not reached here, see above)"
		return
	fi
	if awk -v v="$v" -v b="$5" -v op="$op" 'BEGIN { exit !(op == "<" ? v < b : v <= b) }'; then
		echo "TARGET $1: PASS ($v $op $5)"
	else
		echo "TARGET $1: MISS ($v $([ "$op" = "<" ] && echo ">=" || echo ">") $5)"
		missed=1
	fi
}
target "workers' store, 131072 ranks <= 10 s" workers 131072 3 10
f=$(val workers 131072 4)
[ -n "$f" ] && target "workers' store, 131072 ranks <= 1.25x floor" workers 131072 3 \
	"$(awk -v f="$f" 'BEGIN { print 1.25 * f }')"
f=$(val relay 131072 4)
if [ -n "$f" ]; then
	target "131072 ranks through per-node relays <= 1.25x floor" relay 131072 3 \
		"$(awk -v f="$f" 'BEGIN { print 1.25 * f }')"
else
	echo "TARGET 131072 ranks through per-node relays <= 1.25x floor: UNMEASURED (see above)"
fi
target "requests per rank reaching the store at 131072 ranks (relays) < 1" relay 131072 11 1 "<"
target "rendezvous, 16384 nodes form <= 5 s" rdzv-form 16384 3 5
target "node lost among 16384, re-formed <= 2 s" rdzv-reform 16384 3 2
target "steady host CPU at 16384 nodes <= 20%" rdzv-steady 16384 7 20
target "host RSS at 16384 nodes <= 512 MB" rdzv-reform 16384 8 512
[ "$broken" -eq 0 ] || echo "scale bench: the simulator failed (see above)" >&2
[ "$broken" -eq 0 ] && [ "$missed" -eq 0 ]
