#!/bin/sh
# Workers see a terminal when crun's own output is one (as under torchrun,
# where they inherit it): isatty() is true, a "\r" progress update and the
# output of a program that block-buffers off a terminal reach the screen
# while the worker still runs, prefixes and log files stay right. Off a
# terminal (a pipe), and with CRUN_WORKER_PTY=0, workers get pipes as before.
# `script` (util-linux) gives crun a terminal.
. tests/integration/lib.sh
command -v script >/dev/null || fail "script(1) from util-linux is missing"

cat >"$T/w.sh" <<'EOF2'
#!/bin/sh
[ -t 1 ] && echo "rank $RANK stdout is a tty" || echo "rank $RANK stdout is a pipe"
[ -t 2 ] && echo "rank $RANK stderr is a tty" >&2 || echo "rank $RANK stderr is a pipe" >&2
EOF2
chmod +x "$T/w.sh"

# 1. Under a terminal: both streams are terminals, with --tee prefixes.
script -qec "$CRUN --standalone --nproc_per_node=2 --tee=3 --log_dir=$T/logs $T/w.sh" "$T/typescript1" >/dev/null 2>&1 ||
	fail "crun under script failed"
tr -d '\r' <"$T/typescript1" >"$T/t1"
for r in 0 1; do
	expect_grep "rank $r's stdout is a terminal" "^\[default$r\]:rank $r stdout is a tty$" "$T/t1"
	expect_grep "rank $r's stderr is a terminal" "^\[default$r\]:rank $r stderr is a tty$" "$T/t1"
done
# The tee files hold the bytes as written (no \r\n from the terminal).
f=$(echo "$T"/logs/*/attempt_0/1/stdout.log)
expect_eq "log file bytes" "$(od -c "$f" | head -n 2 | tr -s ' ')" "$(printf 'rank 1 stdout is a tty\n' | od -c | head -n 2 | tr -s ' ')"

# 2. Off a terminal, and with CRUN_WORKER_PTY=0: pipes.
"$CRUN" --standalone "$T/w.sh" >"$T/p.out" 2>&1 || fail "piped run failed"
expect_grep "piped stdout" "^rank 0 stdout is a pipe$" "$T/p.out"
CRUN_WORKER_PTY=0 script -qec "$CRUN --standalone $T/w.sh" "$T/typescript2" >/dev/null 2>&1 || fail "CRUN_WORKER_PTY=0 run failed"
expect_grep "CRUN_WORKER_PTY=0" "rank 0 stdout is a pipe" "$T/typescript2"

# 3. Output arrives while the worker runs: a "\r" update without a newline,
# and a Python print that Python block-buffers off a terminal. The worker
# waits for the test to have seen both on the screen, so crun holding either
# back until the worker exits is a hang, caught by the timeout.
cat >"$T/live.py" <<'EOF2'
import os, sys, time
def wait_for(path):
    deadline = time.time() + 30
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.05)
    return os.path.exists(path)
sys.stdout.write("\rstep 1 of 2")
sys.stdout.flush()
ok = wait_for(sys.argv[1] + ".1")
print("\nbuffered-off-a-tty")  # no flush: line-buffered only on a terminal
ok = wait_for(sys.argv[1] + ".2") and ok
print("seen" if ok else "never seen")
EOF2
( env -u PYTHONUNBUFFERED script -qfec "$CRUN --standalone --no_python $PYTHON $T/live.py $T/go" \
	"$T/typescript3" >/dev/null 2>&1; echo $? >"$T/live.rc" ) &
wait_for 20 grep -qs "step 1 of 2" "$T/typescript3" ||
	fail "a partial line (a carriage-return update) did not arrive while the worker ran"
touch "$T/go.1"
wait_for 20 grep -qs "buffered-off-a-tty" "$T/typescript3" ||
	fail "a line Python buffers off a terminal did not arrive while the worker ran"
touch "$T/go.2"
wait_for 30 test -s "$T/live.rc" || fail "the live worker never finished"
expect_eq "live run status" "$(cat "$T/live.rc")" 0
expect_grep "the worker saw the test's answers" "^seen" "$T/typescript3"
exit 0
