#!/bin/sh
# Console throughput: four workers print 200,000 lines each
# (800,000 lines, 89 MB) through crun to its stdout, plain and with --tee=3
# (prefixed console lines plus log files), beside the floor (the same four
# workers writing to files directly, no launcher) and torchrun --tee=3 (the
# anchors: torchrun 2.x of the test venv, $ANCHOR_VENV_PYTHON, default
# .venv/bin/python, and Debian's 1.13 through tests/helpers/torchrun.py; each
# that is there). Median of 3 runs each. Target: floor/crun >=
# 0.7 in both modes. Prints one "RESULT console.<mode> ..." line per figure
# and exits non-zero on a MISS or when a console line was split or mixed.
set -u
BUILD=${BUILD:-build}
CRUN=${CRUN:-$PWD/$BUILD/crun}
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/crun-bench-console-XXXX)
trap 'rm -rf "$T"' EXIT
LINES=${CONSOLE_LINES:-200000}
ANCHOR_VENV_PYTHON=${ANCHOR_VENV_PYTHON:-$PWD/.venv/bin/python}
X=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx

printf '%s\n' '#!/bin/sh' \
	"exec awk -v r=\"\${LOCAL_RANK:-0}\" 'BEGIN { for (i = 0; i < $LINES; i++) printf \"rank %s line %07d $X\\n\", r, i }'" \
	>"$T/spew.sh"
chmod +x "$T/spew.sh"

now_ms() { date +%s%N | cut -c1-13; }
median() { printf '%s\n' "$@" | sort -n | sed -n 2p; }

floor_once() {
	s=$(now_ms)
	for r in 0 1 2 3; do LOCAL_RANK=$r "$T/spew.sh" >"$T/f.$r" & done
	wait
	echo $(($(now_ms) - s))
}
# crun_once OUT FLAGS...: one crun run, stdout to OUT; 0 unless every line came.
crun_once() {
	out=$1
	shift
	rm -rf "$T/logs"
	s=$(now_ms)
	CRUN_WORKER_PTY=0 "$CRUN" --standalone --nproc_per_node=4 --log_dir="$T/logs" "$@" \
		"$T/spew.sh" >"$out" 2>"$T/err" || {
		echo "crun failed: $(tail -n 3 "$T/err")" >&2
		echo 0
		return
	}
	e=$(($(now_ms) - s))
	n=$(wc -l <"$out")
	[ "$n" -eq $((4 * LINES)) ] || {
		echo "crun delivered $n lines of $((4 * LINES))" >&2
		echo 0
		return
	}
	echo $e
}
anchor_once() {
	s=$(now_ms)
	"$@" --standalone --nproc_per_node=4 --monitor_interval=0.1 --tee=3 --log_dir="$T/alogs" \
		--no_python "$T/spew.sh" >"$T/anchor.out" 2>/dev/null || {
		echo ""
		return
	}
	echo $(($(now_ms) - s))
}

floor=$(median "$(floor_once)" "$(floor_once)" "$(floor_once)")
bytes=$(cat "$T"/f.* | wc -c)
plain=$(median "$(crun_once "$T/plain.out")" "$(crun_once "$T/plain.out")" "$(crun_once "$T/plain.out")")
tee=$(median "$(crun_once "$T/tee.out" --tee=3)" "$(crun_once "$T/tee.out" --tee=3)" \
	"$(crun_once "$T/tee.out" --tee=3)")
# Whole lines, never split or mixed: every console line is one worker's.
bad=$(grep -cv "^\[default[0-3]\]:rank [0-3] line [0-9]\{7\} $X\$" "$T/tee.out")

# anchors: "NAME MS" lines, torchrun 2.x first.
anchors=""
for py in "$ANCHOR_VENV_PYTHON" /usr/bin/python3; do
	v=$("$py" -c 'import torch.distributed.run, torch; print(torch.__version__.split("+")[0])' 2>/dev/null) || continue
	ms=$(anchor_once "$py" tests/helpers/torchrun.py)
	anchors="$anchors${anchors:+
}torchrun_$v ${ms:-failed}"
done
[ -n "$anchors" ] || echo "console bench: no torchrun anchor (no torch in $ANCHOR_VENV_PYTHON or /usr/bin/python3)"
anchor=$(printf '%s\n' "$anchors" | sed -n '1s/^[^ ]* //p')

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
pm() { awk -v r="$1" 'BEGIN { print (r != "n/a" && r >= 0.7) ? "PASS" : "MISS" }'; }
rp=$(ratio "$floor" "$plain")
rt=$(ratio "$floor" "$tee")
echo "console: 4 workers x $LINES lines ($bytes bytes)"
echo "  floor (direct to files)   $floor ms"
echo "  crun                      $plain ms   floor/crun $rp [>= 0.7] $(pm "$rp")"
echo "  crun --tee=3              $tee ms   floor/crun $rt [>= 0.7] $(pm "$rt")"
printf '%s\n' "$anchors" | while read -r name ms; do
	[ -n "$name" ] && echo "  ${name#torchrun_} torchrun --tee=3 $ms ms   crun $(ratio "$ms" "$tee")x faster"
done
echo "  console lines split or mixed with --tee: $bad"
echo "RESULT console.plain crun_ms=$plain floor_ms=$floor ratio=$rp target=0.7 status=$(pm "$rp")"
echo "RESULT console.tee crun_ms=$tee floor_ms=$floor anchor_ms=${anchor:-n/a}$(printf '%s\n' "$anchors" | while read -r name ms; do [ -n "$name" ] && printf ' %s_ms=%s' "$name" "$ms"; done) ratio=$rt target=0.7 status=$(pm "$rt")"
[ "$bad" -eq 0 ] || {
	echo "console bench: $bad console lines split or mixed"
	exit 1
}
[ "$(pm "$rp")" = PASS ] && [ "$(pm "$rt")" = PASS ]
