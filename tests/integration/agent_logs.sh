#!/bin/sh
# Output handling: tee prefixes under many fast writers (no split or mixed
# lines), the log directory layout, redirects, --local_ranks_filter, and
# where a run that asked for no files keeps its error files and report.
. tests/integration/lib.sh

# 8 workers each print 20000 lines as fast as they can, teed.
"$CRUN" --nproc_per_node=8 --tee=3 --log_dir="$T/logs" --rdzv_id=tee \
	"$FAKE_WORKER" print 20000 eprint "bye" >"$T/out" 2>"$T/err" || fail "tee run exited $?"
expect_eq "console lines" "$(wc -l <"$T/out")" 160000
# Every console line is whole and carries the prefix of the rank that wrote it.
bad=$(grep -cvE '^\[default([0-7])\]:rank \1 line [0-9]+ abcdefghijklmnopqrstuvwxyz0123456789 end$' "$T/out")
expect_eq "split or mixed lines" "$bad" 0
for r in 0 1 2 3 4 5 6 7; do
	n=$(grep -c "^\[default$r\]:" "$T/out")
	expect_eq "lines of rank $r" "$n" 20000
	f="$(echo "$T"/logs/tee_*)/attempt_0/$r/stdout.log"
	expect_eq "file lines of rank $r" "$(wc -l <"$f")" 20000
	# The file holds the worker's raw bytes, without prefixes, in order.
	expect_eq "file order of rank $r" "$(sed -n '20000s/.* line \([0-9]*\) .*/\1/p' "$f")" 19999
	expect_grep "stderr file of rank $r" "^bye$" "$(echo "$T"/logs/tee_*)/attempt_0/$r/stderr.log"
done
expect_eq "stderr console" "$(grep -c '^\[default[0-7]\]:bye$' "$T/err")" 8

# Redirect stdout of rank 1 only: its lines go only to its file; the
# other rank's stdout reaches the console unprefixed (not teed).
"$CRUN" --nproc_per_node=2 --redirects=1:1 --log_dir="$T/logs" --rdzv_id=redir \
	"$FAKE_WORKER" print 3 >"$T/out2" 2>&1 || fail "redirect run"
expect_eq "console has rank 0 only" "$(grep -c '^rank 0 line' "$T/out2")" 3
expect_nogrep "rank 1 not on console" "^rank 1 line" "$T/out2"
expect_eq "rank 1 file" "$(grep -c '^rank 1 line' "$(echo "$T"/logs/redir_*)/attempt_0/1/stdout.log")" 3
[ ! -e "$(echo "$T"/logs/redir_*)/attempt_0/0/stdout.log" ] || fail "rank 0 stdout was not redirected"

# --local_ranks_filter picks which ranks reach the console; files keep all.
"$CRUN" --nproc_per_node=3 --tee=1 --local-ranks-filter=0,2 --log_dir="$T/logs" \
	--rdzv_id=filt "$FAKE_WORKER" print 2 >"$T/out3" 2>&1 || fail "filter run"
expect_eq "filtered console" "$(grep -o '^\[default[0-9]\]' "$T/out3" | sort -u | tr '\n' ' ')" "[default0] [default2] "
expect_eq "filtered rank keeps its file" "$(wc -l <"$(echo "$T"/logs/filt_*)/attempt_0/1/stdout.log")" 2

# A redirected stderr still feeds the failure report (read back from its file).
"$CRUN" --nproc_per_node=1 --redirects=2 --log_dir="$T/logs" --rdzv_id=rerr \
	"$FAKE_WORKER" eprint "Traceback: boom" exit 4 >"$T/out4" 2>&1
expect_eq "status" "$?" 4
expect_grep "tail from file" "    Traceback: boom" "$T/out4"

# A partial last line (no newline) is flushed whole at exit.
"$CRUN" --nproc_per_node=1 --tee=1 sh -c 'printf "no newline"' >"$T/out5" 2>&1 || fail "partial run"
expect_grep "partial line" '^\[default0\]:no newline$' "$T/out5"
# No --log_dir and no redirects: each worker's error file and a failure
# report go to $TMPDIR/crun-<uid>/ (the user's own, kept between runs),
# named after the run; a success removes its files, a failure keeps them.
S=$T/scratch U=$(id -u)
mkdir -p "$S"
ef() { TMPDIR=$1 "$CRUN" --nproc_per_node=2 --rdzv_id="$2" sh -c "echo \$LOCAL_RANK \$TORCHELASTIC_ERROR_FILE; $3"; }
ef "$S" ok 'exit 0' >"$T/s1" 2>&1 || fail "scratch run exited $?"
expect_eq "error files in crun-<uid>" "$(grep -c "^[01] $S/crun-$U/ok_[0-9]*_[a-z0-9]*\.attempt_0\.[01]\.error\.json$" "$T/s1")" 2
expect_eq "crun-<uid> is private" "$(stat -c %a "$S/crun-$U")" 700
ef "$S" bad 'echo "{}" >"$TORCHELASTIC_ERROR_FILE"; exit 3' >"$T/s2" 2>&1
expect_eq "failed run status" "$?" 3
report=$(sed -n 's/^crun: failure report saved to \(.*\)$/\1/p' "$T/s2")
case "$report" in "$S/crun-$U/bad_"*.attempt_0.failures.json) ;; *) fail "report at '$report'" ;; esac
[ -f "$report" ] || fail "failure report not kept"
ef "$S" ok2 'echo "{}" >"$TORCHELASTIC_ERROR_FILE"; exit 0' >"$T/s3" 2>&1 || fail "rerun exited $?"
expect_eq "a success takes only its own files" "$(ls "$S/crun-$U" | grep -vc '^bad_')" 0
[ -f "$report" ] || fail "a later success removed an earlier failure's report"
# A failed attempt's files go too once a restart succeeds.
TMPDIR=$S "$CRUN" --nproc_per_node=2 --max_restarts=1 --rdzv_id=again sh -c \
	'[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] || exit 0; echo "{}" >"$TORCHELASTIC_ERROR_FILE"; echo "$TORCHELASTIC_ERROR_FILE" >>"$0"; exit 3' \
	"$T/s4.files" >"$T/s4" 2>&1 || fail "restarted run exited $?"
expect_grep "attempt 0 failed" "restarting the worker group" "$T/s4"
grep -q "^$S/crun-$U/again_.*\.attempt_0\.[01]\.error\.json$" "$T/s4.files" || fail "attempt 0 wrote no error file"
expect_eq "a restarted success takes its failed attempt's files" "$(ls "$S/crun-$U" | grep -c '^again_')" 0
# A crun-<uid> that is a link or open to others is never used: a private
# directory of the run's own instead, removed after a success.
for kind in link open; do
	H=$T/h$kind
	mkdir -p "$H" "$T/elsewhere"
	if [ $kind = link ]; then ln -s "$T/elsewhere" "$H/crun-$U"; else mkdir -m 777 "$H/crun-$U"; fi
	ef "$H" $kind 'exit 0' >"$T/h$kind.out" 2>&1 || fail "$kind: run exited $?"
	expect_eq "$kind: not used" "$(grep -c "^[01] $H/crun_[A-Za-z0-9]*/$kind" "$T/h$kind.out")" 2
	expect_eq "$kind: private directory removed" "$(ls -A "$H")" "crun-$U"
	expect_eq "$kind: nothing written through it" "$(ls -A "$T/elsewhere")$(ls -A "$H/crun-$U/")" ""
done
exit 0
