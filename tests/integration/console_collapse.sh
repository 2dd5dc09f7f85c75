#!/bin/sh
# --console=collapse: the lines that several local ranks print alike are
# shown once, prefixed by their ranks.
#   1. Four shell ranks: their common lines once as [default0-3]:, rank 2's
#      own line with its own prefix, each rank's order kept; the per-rank
#      log files (--tee=3 --log_dir) keep every line of every rank.
#   2. The default (plain) and CRUN_CONSOLE=collapse, and the job file key;
#      a bad value is a usage error (exit 2, one line naming it).
#   3. Rank 0 floods 20000 lines past --console_hold=16K while ranks 1-3
#      print alike: every flooded line reaches the console in order, one
#      line says so, and ranks 1-3 still collapse.
#   4. Real PyTorch 2.x ranks (a gloo group): the same warning and config
#      once; the traceback every rank prints once, rank 1's KeyError apart
#      (the one that differs stands out) from ranks 0,2-3's ValueError;
#      each rank's tqdm bar (redrawn with \r) whole, with its own prefix.
#   5. The same ranks, rank 3 flooding its stdout past --console_hold: its
#      5000 lines in order and uncollapsed, said once; every rank's
#      traceback (stderr, where rank 3 does not flood) still collapses.
# A loaded machine may start ranks seconds apart: the window is wide, so
# that what is checked is what collapses, not how fast the ranks came.
. tests/integration/lib.sh
W=--console_window=5

cat >"$T/w.sh" <<'EOS'
echo "hello from everyone"
echo "config: lr=0.1"
[ "$LOCAL_RANK" = 2 ] && echo "rank two is special"
echo "step of rank $LOCAL_RANK"
echo "done"
EOS

# count PATTERN FILE: lines matching exactly
count() { grep -c -x -F -e "$1" "$2" || true; }

note "1. four ranks"
"$CRUN" --standalone --nproc_per_node=4 --console=collapse $W --tee=3 \
	--log_dir="$T/logs" --no_python sh "$T/w.sh" >"$T/1.out" 2>"$T/1.err" ||
	fail "1: crun exited $?"
expect_eq "1: common line once" "$(count '[default0-3]:hello from everyone' "$T/1.out")" 1
expect_eq "1: config once" "$(count '[default0-3]:config: lr=0.1' "$T/1.out")" 1
expect_eq "1: done once" "$(count '[default0-3]:done' "$T/1.out")" 1
expect_eq "1: rank 2's own line" "$(count '[default2]:rank two is special' "$T/1.out")" 1
for r in 0 1 2 3; do
	expect_eq "1: rank $r's step" "$(count "[default$r]:step of rank $r" "$T/1.out")" 1
	f=$(ls "$T"/logs/*/attempt_0/$r/stdout.log)
	expect_eq "1: rank $r's log file" "$(grep -c . "$f")" "$([ $r = 2 ] && echo 5 || echo 4)"
done
# rank 2's order: its own line before its step
awk '/rank two is special/ {a = NR} /step of rank 2/ {b = NR} END {exit !(a && b && a < b)}' \
	"$T/1.out" || fail "1: rank 2's lines out of order"
expect_eq "1: no other line" "$(wc -l <"$T/1.out")" 8

note "2. plain by default, CRUN_CONSOLE, the job file, a bad value"
"$CRUN" --standalone --nproc_per_node=2 --tee=3 --no_python sh "$T/w.sh" >"$T/2a.out" 2>&1 ||
	fail "2: plain crun exited $?"
expect_eq "2: plain shows each rank" "$(count '[default0]:hello from everyone' "$T/2a.out")" 1
expect_nogrep "2: plain does not collapse" "^\[default0-1\]" "$T/2a.out"
CRUN_CONSOLE=collapse CRUN_CONSOLE_WINDOW=5 "$CRUN" --standalone --nproc_per_node=2 --no_python sh "$T/w.sh" >"$T/2b.out" 2>&1 ||
	fail "2: CRUN_CONSOLE crun exited $?"
expect_eq "2: CRUN_CONSOLE=collapse" "$(count '[default0-1]:hello from everyone' "$T/2b.out")" 1
printf '[logs]\nconsole = collapse\nconsole_window = 5\n[job]\nnproc_per_node = 2\nstandalone = 1\nno_python = 1\nentrypoint = sh\nargs = %s\n' \
	"$T/w.sh" >"$T/job.ini"
"$CRUN" "$T/job.ini" >"$T/2c.out" 2>&1 || { cat "$T/2c.out" >&2; fail "2: job file crun exited $?"; }
expect_eq "2: job file console = collapse" "$(count '[default0-1]:hello from everyone' "$T/2c.out")" 1
"$CRUN" --standalone --console=fancy --no_python true >"$T/2d.out" 2>&1
expect_eq "2: --console=fancy exits 2" "$?" 2
expect_grep "2: the bad value named" "console.*fancy.*expected plain, collapse or collapse,job" "$T/2d.out"
expect_eq "2: in one line" "$(wc -l <"$T/2d.out")" 1

note "3. a flooding rank"
# Ranks 1-3 stay until rank 0 has flooded: their twins would wait for it.
cat >"$T/flood.sh" <<'EOS'
if [ "$LOCAL_RANK" = 0 ]; then
	seq 1 20000 | sed 's/^/flood /'
	: >"$1/flooded"
else
	echo "together"
	i=0; while [ ! -e "$1/flooded" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
fi
EOS
"$CRUN" --standalone --nproc_per_node=4 --console=collapse $W --console_hold=16K \
	--no_python sh "$T/flood.sh" "$T" >"$T/3.out" 2>"$T/3.err" || fail "3: crun exited $?"
expect_eq "3: every flooded line" "$(grep -c '^\[default0\]:flood ' "$T/3.out")" 20000
sed -n 's/^\[default0\]:flood //p' "$T/3.out" | awk '$1 != NR {exit 1}' ||
	fail "3: the flood out of order"
expect_grep "3: said once" "local rank 0 prints more than its share" "$T/3.err"
expect_eq "3: one notice" "$(grep -c 'prints more than its share' "$T/3.err")" 1
expect_eq "3: the others collapse" "$(count '[default1-3]:together' "$T/3.out")" 1
note "   20000 lines of rank 0 in order, ranks 1-3 collapsed"

note "4. real PyTorch ranks"
need_torch2
"$CRUN" --standalone --nproc_per_node=4 --console=collapse $W "$PYTHON" \
	"$TOP/tests/integration/py/collapse_ddp.py" >"$T/4.out" 2>"$T/4.err"
expect_eq "4: crun exits 1" "$?" 1
for l in '[default0-3]:config: lr=0.1 batch=32' '[default0-3]:world sum 4' \
	'[default0-3]:Traceback (most recent call last):' \
	'[default1]:[rank1]: KeyError: "rank one'"'"'s own error"' \
	'[default0,2-3]:ValueError: the common error'; do
	f="$T/4.out"; case $l in *Traceback* | *Error*) f="$T/4.err" ;; esac
	expect_eq "4: $l" "$(count "$l" "$f")" 1
done
expect_eq "4: the warning once" "$(grep -c '^\[default0-3\]:.*UserWarning: the same warning from every rank' "$T/4.err")" 1
for r in 0 1 2 3; do
	expect_eq "4: rank $r's bar whole" \
		"$(grep -c "^\[default$r\]:.*steps: 100%.* 3/3 " "$T/4.err")" 1
done
note "   PyTorch $("$PYTHON" -c 'import torch; print(torch.__version__)'): tracebacks collapsed, rank 1 apart"

note "5. a real rank that floods"
COLLAPSE_FLOOD=3 "$CRUN" --standalone --nproc_per_node=4 --console=collapse $W --console_hold=16K \
	"$PYTHON" "$TOP/tests/integration/py/collapse_ddp.py" >"$T/5.out" 2>"$T/5.err"
expect_eq "5: crun exits 1" "$?" 1
expect_eq "5: every flooded line" "$(grep -c '^\[default3\]:flood ' "$T/5.out")" 5000
sed -n 's/^\[default3\]:flood //p' "$T/5.out" | awk '$1 != NR - 1 {exit 1}' ||
	fail "5: the flood out of order"
expect_eq "5: said once" "$(grep -c 'local rank 3 prints more than its share' "$T/5.err")" 1
expect_eq "5: the traceback still once" "$(count '[default0-3]:Traceback (most recent call last):' "$T/5.err")" 1
expect_eq "5: the common error still once" "$(count '[default0,2-3]:ValueError: the common error' "$T/5.err")" 1
note "   rank 3's 5000 lines in order, the tracebacks collapsed"
