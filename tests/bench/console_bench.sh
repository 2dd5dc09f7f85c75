#!/bin/sh
# Console throughput: four workers print 200,000 lines each through crun to
# its stdout (a file), plain and with --tee=3 (prefixed console lines plus
# log files), beside the floor (the same four workers writing to files
# directly, no launcher, measured in the same run) and torchrun --tee=3 (the
# anchors: torchrun 2.x of the test venv, $ANCHOR_VENV_PYTHON, default
# .venv/bin/python, and Debian's 1.13 through tests/helpers/torchrun.py; each
# that is there). Two line shapes: "awk", 111-byte numbered lines from awk's
# printf (89 MB; the writer's own CPU dominates), and "yes100", 100-byte
# lines from yes | head (80 MB; the writer costs next to nothing, so crun's
# share shows). Median of 3 runs each (CONSOLE_RUNS). Target: floor/crun >=
# 0.7 in both modes, both shapes (SHAPES="awk yes100" by default). Prints one
# "RESULT console.<mode>[.<shape>] ..." line per figure and exits non-zero
# on a MISS or when a console line was split or mixed.
set -u
BUILD=${BUILD:-build}
case $BUILD in /*) CRUN=${CRUN:-$BUILD/crun} ;; *) CRUN=${CRUN:-$PWD/$BUILD/crun} ;; esac
if [ ! -x "$CRUN" ]; then
	echo "console bench: $CRUN is not built (make BUILD=$BUILD)" >&2
	exit 1
fi
PYTHON=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d /tmp/crun-bench-console-XXXX)
trap 'rm -rf "$T"' EXIT
LINES=${CONSOLE_LINES:-200000}
RUNS=${CONSOLE_RUNS:-3}
SHAPES=${SHAPES:-awk yes100}
ANCHOR_VENV_PYTHON=${ANCHOR_VENV_PYTHON:-$PWD/.venv/bin/python}
X=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
# "rank N " and 92 more bytes, with the newline 100.
Y=${X}xx

printf '%s\n' '#!/bin/sh' \
	"exec awk -v r=\"\${LOCAL_RANK:-0}\" 'BEGIN { for (i = 0; i < $LINES; i++) printf \"rank %s line %07d $X\\n\", r, i }'" \
	>"$T/spew-awk.sh"
printf '%s\n' '#!/bin/sh' "yes \"rank \${LOCAL_RANK:-0} $Y\" | head -n $LINES" >"$T/spew-yes100.sh"
chmod +x "$T"/spew-*.sh

now_ms() { date +%s%N | cut -c1-13; }
# median of the numbers given (the middle one; the lower middle of an even count).
median() { printf '%s\n' "$@" | sort -n | sed -n "$((($# + 1) / 2))p"; }

floor_once() {
	s=$(now_ms)
	for r in 0 1 2 3; do LOCAL_RANK=$r "$spew" >"$T/f.$r" & done
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
		"$spew" >"$out" 2>"$T/err" || {
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
		--no_python "$spew" >"$T/anchor.out" 2>/dev/null || {
		echo ""
		return
	}
	echo $(($(now_ms) - s))
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
pm() { awk -v r="$1" 'BEGIN { print (r != "n/a" && r >= 0.7) ? "PASS" : "MISS" }'; }

status=0
for shape in $SHAPES; do
	spew=$T/spew-$shape.sh
	case $shape in
	awk) line="rank [0-3] line [0-9]\{7\} $X" sfx="" ;;
	yes100) line="rank [0-3] $Y" sfx=".$shape" ;;
	*) echo "console bench: unknown shape '$shape'" >&2; exit 1 ;;
	esac
	# The three kinds take turns, so that a change in the machine's load
	# hits all alike.
	fl="" pl="" tl=""
	for i in $(seq "$RUNS"); do
		fl="$fl $(floor_once)"
		pl="$pl $(crun_once "$T/plain.out")"
		tl="$tl $(crun_once "$T/tee.out" --tee=3)"
	done
	floor=$(median $fl) plain=$(median $pl) tee=$(median $tl)
	bytes=$(cat "$T"/f.* | wc -c)
	# Whole lines, never split or mixed: every console line is one worker's.
	bad=$(grep -cv "^$line\$" "$T/plain.out")
	bad=$((bad + $(grep -cv "^\[default[0-3]\]:$line\$" "$T/tee.out")))

	# anchors (the awk shape only): "NAME MS" lines, torchrun 2.x first.
	anchors=""
	if [ "$shape" = awk ]; then
		for py in "$ANCHOR_VENV_PYTHON" /usr/bin/python3; do
			v=$("$py" -c 'import torch.distributed.run, torch; print(torch.__version__.split("+")[0])' 2>/dev/null) || continue
			ms=$(anchor_once "$py" tests/helpers/torchrun.py)
			anchors="$anchors${anchors:+
}torchrun_$v ${ms:-failed}"
		done
		[ -n "$anchors" ] || echo "console bench: no torchrun anchor (no torch in $ANCHOR_VENV_PYTHON or /usr/bin/python3)"
	fi
	anchor=$(printf '%s\n' "$anchors" | sed -n '1s/^[^ ]* //p')

	rp=$(ratio "$floor" "$plain")
	rt=$(ratio "$floor" "$tee")
	echo "console ($shape): 4 workers x $LINES lines ($bytes bytes), load $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "  floor (direct to files)   $floor ms   (runs:$fl)"
	echo "  crun                      $plain ms   floor/crun $rp [>= 0.7] $(pm "$rp")   (runs:$pl)"
	echo "  crun --tee=3              $tee ms   floor/crun $rt [>= 0.7] $(pm "$rt")   (runs:$tl)"
	printf '%s\n' "$anchors" | while read -r name ms; do
		[ -n "$name" ] && echo "  ${name#torchrun_} torchrun --tee=3 $ms ms   crun $(ratio "$ms" "$tee")x faster"
	done
	echo "  console lines split or mixed: $bad"
	echo "RESULT console.plain$sfx crun_ms=$plain floor_ms=$floor ratio=$rp target=0.7 status=$(pm "$rp")"
	if [ "$shape" = awk ]; then
		echo "RESULT console.tee crun_ms=$tee floor_ms=$floor anchor_ms=${anchor:-n/a}$(printf '%s\n' "$anchors" | while read -r name ms; do [ -n "$name" ] && printf ' %s_ms=%s' "$name" "$ms"; done) ratio=$rt target=0.7 status=$(pm "$rt")"
	else
		echo "RESULT console.tee$sfx crun_ms=$tee floor_ms=$floor ratio=$rt target=0.7 status=$(pm "$rt")"
	fi
	if [ "$bad" -ne 0 ]; then
		echo "console bench: $bad console lines split or mixed"
		status=1
	fi
	[ "$(pm "$rp")" = PASS ] && [ "$(pm "$rt")" = PASS ] || status=1
done
exit $status
