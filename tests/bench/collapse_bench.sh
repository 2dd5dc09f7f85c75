#!/bin/sh
# The console's collapse beside today's console (--console=plain, the anchor,
# measured in the same run): 8 local ranks print LINES lines each (default
# 20000), paced 200 us apart on a shared schedule, nine in ten alike on every
# rank and the tenth each rank's own (tests/bench/collapse_load.py). Per
# mode, the median of RUNS runs (3): bytes and lines that reached the
# console, the added latency of a line (its arrival minus when its rank
# printed it, p50 and p99), the most lines held at once (due by the
# schedule on every rank, not yet on the console; a collapsed line stands
# for as many as it names ranks), crun's own CPU seconds. Targets, per node: bytes
# within 10 % of the least one node can show (each alike line once, each own
# line once: 0.9 / 8 + 0.1 of plain's lines), p99 latency within the window
# (0.2 s) plus 50 ms, crun's CPU at most 1.2x plain's.
# Then the job (--console=collapse,job) beside plain: 4 agents of 8 ranks on
# loopback, JOB_LINES lines in all (default 200000), paced 1 ms apart, nine
# in ten alike on every rank of the job: bytes reaching all four consoles at
# most 1/6 of plain's, p99 latency within the window, the four agents' CPU
# at most 1.2x plain's. Prints one "RESULT collapse..." line per figure;
# exits non-zero on a MISS.
set -u
BUILD=${BUILD:-build}
case $BUILD in /*) CRUN=${CRUN:-$BUILD/crun} ;; *) CRUN=${CRUN:-$PWD/$BUILD/crun} ;; esac
PYTHON=${PYTHON:-/usr/bin/python3}
LINES=${COLLAPSE_LINES:-20000}
JOB_LINES=${COLLAPSE_JOB_LINES:-200000}
RUNS=${COLLAPSE_RUNS:-3}
LOAD=tests/bench/collapse_load.py
[ -x "$CRUN" ] || { echo "collapse bench: $CRUN is not built" >&2; exit 1; }

# one MODE-FLAGS...: a JSON line for one run
one() {
	"$PYTHON" "$LOAD" run 200 "$CRUN" --standalone --nproc_per_node=8 "$@" \
		"$PYTHON" "$LOAD" worker "$LINES" 200 2>/dev/null
}
# job MODE-FLAGS...: a JSON line for one run of 4 agents x 8 ranks
job() {
	"$PYTHON" "$LOAD" job 4 1000 "$CRUN" --nproc_per_node=8 "$@" -- \
		"$PYTHON" "$LOAD" worker $((JOB_LINES / 32)) 1000 2>/dev/null
}
# field NAME: that field of every JSON line on stdin, sorted
field() { "$PYTHON" -c "import json,sys; print('\n'.join(sorted((str(json.loads(l)['$1']) for l in sys.stdin), key=float)))"; }
median() { sed -n "$(((RUNS + 1) / 2))p"; }

T=$(mktemp -d /tmp/crun-bench-collapse-XXXX)
trap 'rm -rf "$T"' EXIT
i=0
while [ $i -lt "$RUNS" ]; do # taking turns: the machine's drift hits both
	one --tee=1 >>"$T/plain"
	one --console=collapse >>"$T/collapse"
	job --tee=1 >>"$T/jplain"
	job --console=collapse,job >>"$T/job"
	i=$((i + 1))
done
for f in plain collapse jplain job; do
	grep -q '"rc": 0' "$T/$f" || { echo "collapse bench: a $f run failed: $(cat "$T/$f")" >&2; exit 1; }
done
for k in bytes lines held p50_ms p99_ms cpu_s; do
	eval "p_$k=\$(field $k <\"\$T/plain\" | median)"
	eval "c_$k=\$(field $k <\"\$T/collapse\" | median)"
	eval "q_$k=\$(field $k <\"\$T/jplain\" | median)"
	eval "j_$k=\$(field $k <\"\$T/job\" | median)"
done
rc=0
# verdict NAME VALUE OK: prints the RESULT line
verdict() {
	v=MISS
	[ "$3" = 1 ] && v=ok
	[ $v = ok ] || rc=1
	echo "RESULT collapse.$1 $2 $v"
}
# table A B NAME CPU-LABEL: the figures of runs A (the anchor) and B
table() {
	printf '  %-26s %12s %12s %8s\n' "" plain "$3" ratio
	for k in bytes lines; do
		eval "x=\$$1_$k y=\$$2_$k"
		printf '  %-26s %12s %12s %8s\n' "console $k" "$x" "$y" "$("$PYTHON" -c "print(round($y / $x, 3))")"
	done
	for k in "held:lines held at once (peak)" "p50_ms:added latency p50 (ms)" "p99_ms:added latency p99 (ms)"; do
		eval "x=\$$1_${k%%:*} y=\$$2_${k%%:*}"
		printf '  %-26s %12s %12s\n' "${k#*:}" "$x" "$y"
	done
	eval "x=\$$1_cpu_s y=\$$2_cpu_s"
	printf '  %-26s %12s %12s %8s\n' "$4" "$x" "$y" "$("$PYTHON" -c "print(round($y / max($x, 0.01), 2))")"
}
ideal=$("$PYTHON" -c "print(round($p_bytes * (0.9 / 8 + 0.1)))")
echo "8 ranks x $LINES lines, 90 % alike; median of $RUNS runs each, plain (--tee=1) is the anchor"
table p c collapse "crun CPU (s)"
verdict bytes "$c_bytes (least one node can show: $ideal)" \
	"$("$PYTHON" -c "print(int($c_bytes <= 1.1 * $ideal))")"
verdict p99_ms "$c_p99_ms (window 200 + 50)" "$("$PYTHON" -c "print(int($c_p99_ms <= 250))")"
verdict cpu "$c_cpu_s s vs $p_cpu_s s" \
	"$("$PYTHON" -c "print(int($c_cpu_s <= 1.2 * $p_cpu_s + 0.02))")"
echo "4 agents x 8 ranks, $JOB_LINES lines in all (bytes and lines of all 4 consoles), 90 % alike; median of $RUNS runs each, plain (--tee=1) is the anchor"
table q j job "4 agents' CPU (s)"
verdict job.bytes "$j_bytes (1/6 of plain: $((q_bytes / 6)))" \
	"$("$PYTHON" -c "print(int($j_bytes * 6 <= $q_bytes))")"
verdict job.p99_ms "$j_p99_ms (window 200)" "$("$PYTHON" -c "print(int($j_p99_ms <= 200))")"
verdict job.cpu "$j_cpu_s s vs $q_cpu_s s" \
	"$("$PYTHON" -c "print(int($j_cpu_s <= 1.2 * $q_cpu_s + 0.02))")"
exit $rc
