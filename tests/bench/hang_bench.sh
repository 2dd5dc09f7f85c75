#!/bin/sh
# The hang benchmark: a job that hangs, under crun --stall_timeout and under
# torchrun, side by side in one run: torchrun 2.13 (python -m
# torch.distributed.run of the test venv, $ANCHOR_VENV_PYTHON, default
# .venv/bin/python) and Debian's torchrun 1.13 (tests/helpers/torchrun.py
# under /usr/bin/python3, or $TORCHRUN_ANCHOR). Each launcher runs the same
# job on its own interpreter (crun with PYTHON_EXEC set to it): 4 gloo ranks
# (tests/integration/py/stall_gloo.py), of which rank 3 skips an all_reduce
# on the first attempt and blocks (--max_restarts=1; the fault is injected
# once, through TORCHELASTIC_RESTART_COUNT). From the moment rank 3 blocks
# (its line "skipping all_reduce") it measures
#   (a) until the hang is named with stacks (crun's "hang:" line), and
#   (b) until the job runs again (rank 0's "attempt 1 running").
# A launcher that has done neither by BOUND seconds is stopped and reported
# as "> BOUND" (torchrun: gloo waits its timeout, 30 minutes by default; an
# hour in this job), its ratio as BOUND / crun ("> Nx"). Targets: crun names
# the hang within S + 5 s and runs again within S + 15 s (S the stall
# timeout; "running again" includes the new workers' start, import torch
# and init_process_group). One "RESULT hang.<figure> ..." line per figure.
# Exit status: 0
# unless crun failed, or a target was missed.
# Knobs: S (default 5), BOUND (default 60), ANCHOR_VENV_PYTHON,
# TORCHRUN_ANCHOR (a path, or "none").
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
S=${S:-5}
BOUND=${BOUND:-60}
root=$(cd "$(dirname "$0")/../.." && pwd)
CRUN="$BUILD/crun"
case $CRUN in /*) ;; *) CRUN="$PWD/$CRUN" ;; esac
ANCHOR_VENV_PYTHON=${ANCHOR_VENV_PYTHON:-$root/.venv/bin/python}
W=$root/tests/integration/py/stall_gloo.py

[ -x "$CRUN" ] || { echo "hang bench: $CRUN is not built (make BUILD=$BUILD)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/crun-hang-bench.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP

cat >"$tmp/drv.py" <<'PY'
# The hang bench's timer (written out by tests/bench/hang_bench.sh): runs one
# launcher, stamps its output lines, prints "hang_named_ms=... running_ms=...
# rc=..." (empty: not within the bound).
import os, signal, subprocess, sys, threading, time

bound, log, argv = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                     stderr=subprocess.STDOUT, start_new_session=True)
t = {}
def reader():
    with open(log, "w") as f:
        for raw in p.stdout:
            line = raw.decode(errors="replace").rstrip()
            now = time.monotonic()
            f.write("%.3f %s\n" % (now, line))
            if "rank 3: skipping all_reduce" in line:
                t.setdefault("hang", now)
            elif "crun: hang: " in line:
                t.setdefault("named", now)
            elif "rank 0: attempt 1 running" in line:
                t.setdefault("running", now)
th = threading.Thread(target=reader, daemon=True)
th.start()
end = time.monotonic() + 120
while "hang" not in t and p.poll() is None and time.monotonic() < end:
    time.sleep(0.02)
if "hang" in t:
    end = t["hang"] + bound
    while "running" not in t and p.poll() is None and time.monotonic() < end:
        time.sleep(0.02)
if "running" in t:
    # Running again: the job then finishes on its own (bounded).
    try:
        p.wait(60)
    except subprocess.TimeoutExpired:
        pass
rc = p.poll()
if rc is None:
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    rc = "stopped"
else:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass
th.join(5)
ms = lambda k: "%.0f" % ((t[k] - t["hang"]) * 1000) if k in t and "hang" in t else ""
print("hang_seen=%d hang_named_ms=%s running_ms=%s rc=%s" % ("hang" in t, ms("named"), ms("running"), rc))
PY

field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= b + 0) }'; }
pm() { if "$@"; then echo PASS; else echo MISS; fi; }
# shown MS: the figure, or "> BOUND" when it did not happen in time.
shown() { if [ -n "$1" ]; then echo "$1"; else echo "> $((BOUND * 1000))"; fi; }
# ratio ANCHOR_MS CRUN_MS: anchor / crun, "> Nx" when the anchor ran out.
ratio() {
	[ -n "$2" ] || { echo -; return; }
	if [ -n "$1" ]; then awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1fx\n", a / b }'
	else awk -v a="$((BOUND * 1000))" -v b="$2" 'BEGIN { printf "> %.0fx\n", a / b }'; fi
}

# The anchors: 2 (torchrun 2.x of the venv) and 1 (Debian's 1.13), each with
# the interpreter crun runs its side of the pair with.
printf '#!/bin/sh\nexec "%s" -m torch.distributed.run "$@"\n' "$ANCHOR_VENV_PYTHON" >"$tmp/torchrun-2"
py_2=$ANCHOR_VENV_PYTHON
if [ -n "${TORCHRUN_ANCHOR:-}" ]; then
	[ "$TORCHRUN_ANCHOR" = none ] || printf '#!/bin/sh\nexec "%s" "$@"\n' "$TORCHRUN_ANCHOR" >"$tmp/torchrun-1"
else
	printf '#!/bin/sh\nexec /usr/bin/python3 "%s" "$@"\n' "$root/tests/helpers/torchrun.py" >"$tmp/torchrun-1"
fi
py_1=/usr/bin/python3
echo "== hang bench: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), S=$S s, bound $BOUND s"
broken=0 misses=0 verdicts=""
printf '   %-34s %10s %16s %10s\n' figure crun torchrun ratio
for a in 2 1; do
	[ -f "$tmp/torchrun-$a" ] || continue
	chmod +x "$tmp/torchrun-$a"
	eval "py=\$py_$a"
	v=$("$py" -c 'import torch; print(torch.__version__.split("+")[0].split("a")[0])' 2>/dev/null)
	if [ -z "$v" ] || ! "$tmp/torchrun-$a" --help >/dev/null 2>&1; then
		echo "   torchrun anchor $a unavailable: left out"
		continue
	fi
	STALL_RANK=3 PYTHON_EXEC=$py PYTHONFAULTHANDLER=1 \
		"$PYTHON" "$tmp/drv.py" "$BOUND" "$tmp/crun-$a.log" "$CRUN" --standalone \
		--nproc_per_node=4 --max_restarts=1 --stall_timeout="$S" "$W" >"$tmp/c.out"
	c=$(cat "$tmp/c.out")
	STALL_RANK=3 OMP_NUM_THREADS=1 \
		"$PYTHON" "$tmp/drv.py" "$BOUND" "$tmp/torchrun-$a.log" "$tmp/torchrun-$a" --standalone \
		--nproc_per_node=4 --max_restarts=1 "$W" >"$tmp/t.out"
	t=$(cat "$tmp/t.out")
	cn=$(field hang_named_ms "$c") cr=$(field running_ms "$c")
	tn=$(field hang_named_ms "$t") tr=$(field running_ms "$t")
	if [ "$(field hang_seen "$c")" != 1 ] || [ "$(field rc "$c")" != 0 ] || [ -z "$cn" ] || [ -z "$cr" ]; then
		echo "   crun (torch $v): FAILED ($c); log: $(tail -n 5 "$tmp/crun-$a.log" | tr '\n' ' ' | cut -c1-400)"
		broken=1
	fi
	[ "$(field hang_seen "$t")" = 1 ] || echo "   torchrun $v: rank 3 never blocked ($t)"
	echo "   torch $v: crun vs torchrun $v"
	printf '   %-34s %10s %16s %10s\n' "(a) hang named with stacks, ms" "${cn:--}" "$(shown "$tn")" "$(ratio "$tn" "$cn")"
	printf '   %-34s %10s %16s %10s\n' "(b) job running again, ms" "${cr:--}" "$(shown "$tr")" "$(ratio "$tr" "$cr")"
	echo "RESULT hang.named_$a torch=$v crun_ms=$cn anchor_ms=${tn:->$((BOUND * 1000))} ratio=$(ratio "$tn" "$cn" | tr -d ' ') target_ms=$(((S + 5) * 1000)) status=$(pm le "$cn" $(((S + 5) * 1000)))"
	echo "RESULT hang.running_$a torch=$v crun_ms=$cr anchor_ms=${tr:->$((BOUND * 1000))} ratio=$(ratio "$tr" "$cr" | tr -d ' ') target_ms=$(((S + 15) * 1000)) status=$(pm le "$cr" $(((S + 15) * 1000)))"
	vn=$(pm le "$cn" $(((S + 5) * 1000))) vr=$(pm le "$cr" $(((S + 15) * 1000)))
	verdicts="$verdicts$(printf '   %-64s %s' "(5a) torch $v: hang named within S + 5 s (${cn:--} ms)" "$vn")
$(printf '   %-64s %s' "(5b) torch $v: job running again within S + 15 s (${cr:--} ms)" "$vr")
"
	[ "$vn" = PASS ] || misses=$((misses + 1))
	[ "$vr" = PASS ] || misses=$((misses + 1))
done
echo "targets"
printf '%s' "$verdicts"
if [ $broken -ne 0 ]; then
	echo "hang bench: crun failed (see FAILED above)"
	exit 1
fi
if [ $misses -ne 0 ]; then
	echo "hang bench: $misses stated target(s) missed (MISS in the RESULT lines)"
	exit 1
fi
exit 0
