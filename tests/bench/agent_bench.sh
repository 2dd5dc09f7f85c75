#!/bin/sh
# The agent benchmark: crun against the torchrun anchors on
# this machine, in one run: torchrun 2.13 (python -m torch.distributed.run of
# the test venv, $ANCHOR_VENV_PYTHON, default .venv/bin/python: the reference
# the targets are judged against) and Debian's torchrun 1.13
# (tests/helpers/torchrun.py under /usr/bin/python3, or $TORCHRUN_ANCHOR):
#
# Floors, what the machine itself does in the same run, beside crun's
# figures: `sh -c '/bin/true & (4 times) wait'` for the standalone run, and N
# shells each forking and waiting for /bin/true (`sh -c '/bin/true & wait'`,
# started like the agents) for each of BIG_SIZES. Targets against them:
# standalone <= 1.5x its floor, 1024 agents <= 2.0x theirs.
#
# one node (--standalone):
#   (a) 4 workers of /bin/true, start to exit, median of RUNS (crun, and
#       the floor taking turns with it) and
#       ANCHOR_RUNS (torchrun, default flags; also ANCHOR_FAST_RUNS with
#       --monitor_interval=0.1, torchrun's best case, which the ratio target
#       is judged against);
#   (b) the extra time of one failure + restart: median of runs whose 4
#       workers exit 3 on attempt 0 and 0 on attempt 1 (--max_restarts=1)
#       minus the median plain run (crun's two kinds take turns);
#   (c) the agent's peak RSS: VmHWM of the agent process itself, read from
#       /proc while its 4 workers sleep 300 ms (workers not included).
# N agents on loopback (--rdzv_backend=c10d, one /bin/true worker
#   each), from the start of the first agent to the exit of the last, for N
#   in SIZES (crun GROUP_RUNS times, torchrun ANCHOR_GROUP_RUNS times), then
#   crun alone for N in BIG_SIZES; and node loss: 3 agents (--nnodes=2:3)
#   whose workers hang on attempt 0, kill -9 of a non-host agent, time until
#   both survivors log the round's end ("detected"), "re-forming", and exit 0
#   (with last_call_timeout=REFORM_LAST_CALL s; crun closes the new round as
#   soon as every survivor has rejoined, so it does not wait for it).
#
# Times are taken by a small Python timer ($PYTHON) that starts the processes
# with posix_spawn. Every figure, the ratios and the targets with PASS/MISS
# are printed, and one "RESULT agent.<figure> key=value..." line per figure.
# Without the anchor, crun's figures alone. Exit status: 0 unless crun failed
# or hung (or the bench broke), or a target was missed (MISS).
# Knobs: RUNS ANCHOR_RUNS ANCHOR_FAST_RUNS ANCHOR_FAIL_RUNS SIZES GROUP_RUNS
# ANCHOR_GROUP_RUNS BIG_SIZES BIG_RUNS REFORM_RUNS REFORM_LAST_CALL
# ANCHOR_VENV_PYTHON and TORCHRUN_ANCHOR (a path, or "none"), GROUP_CONF (crun's --rdzv_conf for the
# N-agent runs, e.g. keep_alive_interval=2 where the machine is too loaded
# for the default 1.5 s bound on a hung node).
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
CRUN="$BUILD/crun"
FW="$BUILD/tests/fake_worker"
RUNS=${RUNS:-30}
ANCHOR_RUNS=${ANCHOR_RUNS:-10}
ANCHOR_FAST_RUNS=${ANCHOR_FAST_RUNS:-5}
ANCHOR_FAIL_RUNS=${ANCHOR_FAIL_RUNS:-3}
SIZES=${SIZES-"2 4 8 16"}
GROUP_RUNS=${GROUP_RUNS:-5}
ANCHOR_GROUP_RUNS=${ANCHOR_GROUP_RUNS:-3}
BIG_SIZES=${BIG_SIZES-"64 256 1024"}
BIG_RUNS=${BIG_RUNS:-5}
REFORM_RUNS=${REFORM_RUNS:-3}
REFORM_LAST_CALL=${REFORM_LAST_CALL:-1}

root=$(cd "$(dirname "$0")/../.." && pwd)
ANCHOR_VENV_PYTHON=${ANCHOR_VENV_PYTHON:-$root/.venv/bin/python}

for f in "$CRUN" "$FW"; do
	if [ ! -x "$f" ]; then
		echo "agent bench: $f is not built (make BUILD=$BUILD check-build)" >&2
		exit 1
	fi
done
case $CRUN in /*) ;; *) CRUN="$PWD/$CRUN" FW="$PWD/$FW" ;; esac
if ! "$PYTHON" -c 'import os; os.posix_spawn' 2>/dev/null; then
	echo "agent bench: needs Python 3.8+ as its timer (PYTHON=$PYTHON)" >&2
	exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/crun-agent-bench.XXXXXX") || exit 1
drv_pid=""
cleanup() {
	# The timer stops what it started when it times out; this is for ^C.
	if [ -n "$drv_pid" ]; then
		kill "$drv_pid" 2>/dev/null
		wait "$drv_pid" 2>/dev/null
	fi
	for f in "$tmp"/*.pids; do
		[ -f "$f" ] && kill -KILL $(cat "$f") 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# 1024 agents: the store host holds one connection per agent.
ulimit -n "$(ulimit -Hn)" 2>/dev/null

cat >"$tmp/drv.py" <<'PY'
# The bench's timer (written out by tests/bench/agent_bench.sh). Prints one
# line of key=value results per call; times in ms.
import os, sys, time, signal, socket, threading, statistics, subprocess, random

LIVE = set()  # pids started and not yet reaped, stopped on SIGTERM/SIGINT

def spawn(argv, err="/dev/null"):
    fa = [(os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
          (os.POSIX_SPAWN_OPEN, 1, "/dev/null", os.O_WRONLY, 0),
          (os.POSIX_SPAWN_OPEN, 2, err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)]
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=fa)
    LIVE.add(pid)
    return pid

class Timeout(Exception):
    pass

def on_alarm(s, f):
    raise Timeout()

signal.signal(signal.SIGALRM, on_alarm)

def on_term(s, f):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    stop(list(LIVE))
    os._exit(130)

signal.signal(signal.SIGTERM, on_term)
signal.signal(signal.SIGINT, on_term)

def code(status):
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)

def stop(pids):
    # SIGTERM (crun and torchrun stop their workers), then SIGKILL.
    for p in pids:
        try: os.kill(p, signal.SIGTERM)
        except OSError: pass
    end = time.monotonic() + 10
    left = set(pids)
    while left and time.monotonic() < end:
        for p in list(left):
            try:
                if os.waitpid(p, os.WNOHANG)[0]: left.discard(p)
            except ChildProcessError: left.discard(p)
        time.sleep(0.05)
    for p in left:
        try: os.kill(p, signal.SIGKILL); os.waitpid(p, 0)
        except OSError: pass
    LIVE.difference_update(pids)

def ms(x):
    return "%.2f" % (x * 1000) if x < 10 else "%.0f" % (x * 1000)

def stats(ts):
    if not ts:
        return "median_ms= min_ms= max_ms="
    return "median_ms=%s min_ms=%s max_ms=%s" % (ms(statistics.median(ts)), ms(min(ts)), ms(max(ts)))

# A free port below the ephemeral range (32768-), so that no outgoing
# connection of this machine takes it between this check and the agents'
# bind (crun then waits for a host that never listens: see the report).
def free_port():
    for _ in range(200):
        p = random.randrange(20000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
        except OSError:
            continue
        finally:
            s.close()
        if not listening(p):
            return p
    raise SystemExit("no free port")

# repeat RUNS TIMEOUT LOG -- argv [-- argv ...]: run each command RUNS times,
# the commands taking turns (so that a change in the machine's load hits all
# alike); one result line per command.
def repeat(runs, timeout, log, argvs):
    res = [([], []) for _ in argvs]
    for _ in range(runs):
        for k, argv in enumerate(argvs):
            ts, rcs = res[k]
            if "hang" in rcs:
                continue
            t0 = time.perf_counter()
            pid = spawn(argv, "%s.%d" % (log, k))
            signal.alarm(timeout)
            try:
                _, st, _ = os.wait4(pid, 0)
                LIVE.discard(pid)
            except Timeout:
                stop([pid])
                rcs.append("hang")
                continue
            finally:
                signal.alarm(0)
            t = time.perf_counter() - t0
            rcs.append(str(code(st)))
            if code(st) == 0:
                ts.append(t)
    for ts, rcs in res:
        print("runs=%d ok=%d %s rcs=%s" % (runs, len(ts), stats(ts), ",".join(rcs)))

# hwm TIMEOUT LOG -- argv: the peak RSS (VmHWM) of the process itself, read
# from /proc every 2 ms while it runs (the last reading before it exits).
def hwm(timeout, log, argv):
    pid = spawn(argv, log)
    end = time.monotonic() + timeout
    peak, st, ru = 0, None, None
    while True:
        try:
            with open("/proc/%d/status" % pid) as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak = max(peak, int(line.split()[1]))
        except OSError:
            pass
        r, st, ru = os.wait4(pid, os.WNOHANG)
        if r:
            LIVE.discard(pid)
            break
        if time.monotonic() > end:
            stop([pid])
            print("error=hang")
            return
        time.sleep(0.002)
    print("rc=%d vmhwm_kb=%d maxrss_kb=%d" % (code(st), peak, ru.ru_maxrss))

# group N RUNS TIMEOUT LOGDIR -- argv [-- argv...]: start N copies at once
# (@PORT@ and @ID@ replaced, a fresh port per run), time from the first
# start to the last exit; with several command lines they take turns run
# by run (so that each sees the machine as the others do), one result line
# each, in order.
def group(n, runs, timeout, logdir, argvs):
    res = [{"ts": [], "sp": [], "fails": 0, "hung": 0, "notes": [], "broke": False}
           for _ in argvs]
    for r in range(runs):
        for k, argv in enumerate(argvs):
            g = res[k]
            if g["broke"]:
                continue
            port = str(free_port())
            jid = "bench%d_%d_%d_%d" % (os.getpid(), n, k, r)
            a = [x.replace("@PORT@", port).replace("@ID@", jid) for x in argv]
            pids = {}
            t0 = time.perf_counter()
            try:
                for i in range(n):
                    pids[spawn(a, "%s/%d.%d.%d.log" % (logdir, k, r, i))] = i
            except OSError as e:
                stop(list(pids))
                g["notes"].append("spawn_failed_after_%d:%s" % (len(pids), e.strerror.replace(" ", "_")))
                g["fails"] += 1
                g["broke"] = True
                continue
            t1 = time.perf_counter()
            left, bad = dict(pids), []
            signal.alarm(timeout)
            try:
                while left:
                    p, st = os.wait()
                    LIVE.discard(p)
                    if p in left:
                        i = left.pop(p)
                        if code(st) != 0:
                            bad.append("%d:%d" % (i, code(st)))
            except Timeout:
                g["hung"] += 1
                g["notes"].append("run%d_hung:%d_of_%d_left(e.g._agent_%d)" % (r, len(left), n, min(left.values())))
                stop(list(left))
                continue
            finally:
                signal.alarm(0)
            t = time.perf_counter() - t0
            if bad:
                g["fails"] += 1
                g["notes"].append("run%d_failed_agents:%s" % (r, ",".join(bad[:5])))
                continue
            g["ts"].append(t)
            g["sp"].append(t1 - t0)
    for g in res:
        print("n=%d runs=%d ok=%d %s spawn_ms=%s failed=%d hung=%d note=%s" % (n, runs, len(g["ts"]),
              stats(g["ts"]), ms(statistics.median(g["sp"])) if g["sp"] else "", g["fails"], g["hung"],
              ";".join(g["notes"]) or "-"))

def listening(port):
    h = ":%04X" % port
    for f in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            for line in open(f):
                x = line.split()
                if len(x) > 3 and x[1].endswith(h) and x[3] == "0A":
                    return True
        except OSError:
            pass
    return False

# reform RUNS TIMEOUT DIR LAST_CALL CRUN FAKE_WORKER: 3 agents (--nnodes=2:3)
# whose workers hang on attempt 0; kill -9 a non-host agent once the three
# workers run; time until both survivors log the round's end, log
# "re-forming", and exit.
def reform(runs, timeout, d, last_call, crun, fw):
    det, ref, ext, notes, ok = [], [], [], [], 0
    for r in range(runs):
        port = free_port()
        pidf = "%s/reform%d.pids" % (d, r)
        open(pidf, "w").close()
        argv = [crun, "--nnodes=2:3", "--nproc_per_node=1", "--rdzv_backend=c10d",
                "--rdzv_endpoint=127.0.0.1:%d" % port, "--rdzv_id=reform%d_%d" % (os.getpid(), r),
                "--rdzv_conf=join_timeout=20,last_call_timeout=%s" % last_call,
                fw, "pid", pidf, "hang-if-attempt", "0"]
        procs, lines, exits = [], {}, {}
        def reader(k, p):
            for raw in p.stderr:
                lines.setdefault(k, []).append((time.perf_counter(), raw.decode(errors="replace").rstrip()))
            p.wait()
            exits[k] = (time.perf_counter(), p.returncode)
        def start(k):
            p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE)
            LIVE.add(p.pid)
            th = threading.Thread(target=reader, args=(k, p), daemon=True)
            th.start()
            procs.append(p)
        def alldone():
            for p in procs:
                if p.poll() is None:
                    try: p.kill()
                    except OSError: pass
                    p.wait()
            for x in open(pidf).read().split():
                try: os.kill(int(x), signal.SIGKILL)
                except (OSError, ValueError): pass
        start("a")
        end = time.monotonic() + 10
        while not listening(port) and time.monotonic() < end:
            time.sleep(0.01)
        if not listening(port):
            notes.append("run%d:no_store_host" % r); alldone(); continue
        start("b"); start("c")
        end = time.monotonic() + timeout
        while len(open(pidf).read().split()) < 3 and time.monotonic() < end:
            time.sleep(0.01)
        if len(open(pidf).read().split()) < 3:
            notes.append("run%d:round0_never_ran_3_workers" % r); alldone(); continue
        time.sleep(0.2)  # let the round settle (heartbeats flowing)
        t0 = time.perf_counter()
        procs[2].kill()
        end = time.monotonic() + timeout
        while ("a" not in exits or "b" not in exits) and time.monotonic() < end:
            time.sleep(0.01)
        if "a" not in exits or "b" not in exits:
            notes.append("run%d:survivors_hung" % r); alldone(); continue
        time.sleep(0.05)
        def first(k, *words):
            for t, l in lines.get(k, []):
                if t >= t0 and all(w in l for w in words):
                    return t - t0
            return None
        dt = [first(k, "round", "ended") for k in "ab"]
        rt = [first(k, "re-forming") for k in "ab"]
        et = [exits[k][0] - t0 for k in "ab"]
        rc = [exits[k][1] for k in "ab"]
        # Every worker of the run (3 in round 0, 2 after) must be gone.
        left = []
        for x in open(pidf).read().split():
            try:
                os.kill(int(x), 0)
                st = open("/proc/%s/stat" % x).read().split()[2]
                if st != "Z": left.append(x)
            except (OSError, ValueError):
                pass
        alldone()
        if None in dt or None in rt or rc != [0, 0] or left:
            why = "run%d:" % r
            if None in dt: why += "no_round_end_logged,"
            if None in rt: why += "no_re-forming_logged,"
            if rc != [0, 0]: why += "survivor_rc=%s," % "/".join(map(str, rc))
            if left: why += "orphan_workers=%s," % "/".join(left)
            notes.append(why.rstrip(","))
            with open("%s/reform%d.log" % (d, r), "w") as f:
                for k in "abc":
                    for t, l in lines.get(k, []):
                        f.write("%s %+.3f %s\n" % (k, t - t0, l))
            continue
        ok += 1
        det.append(max(dt)); ref.append(max(rt)); ext.append(max(et))
    med = lambda v: ms(statistics.median(v)) if v else ""
    print("runs=%d ok=%d detect_ms=%s reform_ms=%s exit_ms=%s detect_max_ms=%s note=%s" % (
        runs, ok, med(det), med(ref), med(ext), ms(max(det)) if det else "", ";".join(notes) or "-"))

def main():
    a = sys.argv[1:]
    cmd = a.pop(0)
    argvs = []
    if "--" in a:
        i = a.index("--")
        rest = a[i + 1:]
        a = a[:i]
        argvs = [[]]
        for x in rest:
            if x == "--":
                argvs.append([])
            else:
                argvs[-1].append(x)
    argv = argvs[0] if argvs else []
    if cmd == "repeat": repeat(int(a[0]), int(a[1]), a[2], argvs)
    elif cmd == "hwm": hwm(int(a[0]), a[1], argv)
    elif cmd == "group": group(int(a[0]), int(a[1]), int(a[2]), a[3], argvs)
    elif cmd == "reform": reform(int(a[0]), int(a[1]), a[2], a[3], a[4], a[5])
    sys.stdout.flush()

main()
PY

# drv ARGS...: run the timer in the background of this shell (so that a
# signal reaches the trap at once; never call it inside $(...)), its result
# line in $tmp/drv.out, read back with got. The processes it starts are its
# own children, which it stops when it gets SIGTERM.
drv() {
	"$PYTHON" "$tmp/drv.py" "$@" >"$tmp/drv.out" 2>"$tmp/drv.err" &
	drv_pid=$!
	wait "$drv_pid"
	drv_pid=""
	if [ ! -s "$tmp/drv.out" ]; then
		echo "error=timer_broke:$(tail -n 1 "$tmp/drv.err" | tr ' ' '_')" >"$tmp/drv.out"
	fi
}
got() { cat "$tmp/drv.out"; }

# field NAME LINE: the value of NAME=... in a result line.
field() { printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p" | head -n 1; }
# lineof N TEXT: line N of TEXT.
lineof() { printf '%s\n' "$2" | sed -n "${1}p"; }
# calc EXPR with a and b: awk arithmetic, "" if an input is missing.
calc() { awk -v a="$2" -v b="$3" "BEGIN { if (a == \"\" || b == \"\" || (\"$4\" == \"div\" && b + 0 == 0)) print \"\"; else printf \"%.${5:-2}f\\n\", $1 }"; }
ratio() { calc "a / b" "$1" "$2" div "${3:-1}"; }
le() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 <= b + 0) }'; }
ge() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a + 0 >= b + 0) }'; }
# tails LOGS...: the last lines of the first non-empty log, on one line.
tails() {
	for f in "$@"; do
		[ -s "$f" ] || continue
		tail -n 3 "$f" | tr '\n' ' ' | cut -c1-300
		return
	done
}

broken=0
misses=0
# crun_ok LABEL RESULT LOGS...: check that every crun run of RESULT succeeded.
crun_ok() {
	_ok=$(field ok "$2") _runs=$(field runs "$2")
	if [ -n "$(field error "$2")" ] || [ -z "$_ok" ] || [ "$_ok" != "$_runs" ]; then
		echo "   crun $1: FAILED ($2)"
		shift 2
		echo "      log: $(tails "$@")"
		broken=1
		return 1
	fi
	return 0
}
# verdict TEXT STATUS: STATUS is PASS, MISS or n/a.
verdict() {
	printf '   %-64s %s\n' "$1" "$2"
	[ "$2" = MISS ] && misses=$((misses + 1))
	return 0
}
pm() { if "$@"; then echo PASS; else echo MISS; fi; }

load() { cut -d' ' -f1-3 /proc/loadavg; }
echo "== agent bench: $(nproc) cores, load $(load), crun $CRUN"
# The anchors, each an executable in $tmp: 2 (torchrun 2.x of the venv) and
# 1 (Debian's 1.13). anchors lists those that run; an anchor that fails once
# is not run again.
anchors=""
printf '#!/bin/sh\nexec "%s" -m torch.distributed.run "$@"\n' "$ANCHOR_VENV_PYTHON" >"$tmp/torchrun-2"
if [ -n "${TORCHRUN_ANCHOR:-}" ]; then
	[ "$TORCHRUN_ANCHOR" = none ] || printf '#!/bin/sh\nexec "%s" "$@"\n' "$TORCHRUN_ANCHOR" >"$tmp/torchrun-1"
else
	printf '#!/bin/sh\nexec /usr/bin/python3 "%s" "$@"\n' "$root/tests/helpers/torchrun.py" >"$tmp/torchrun-1"
fi
for a in 2 1; do
	[ -f "$tmp/torchrun-$a" ] || continue
	chmod +x "$tmp/torchrun-$a"
	case $a in 2) v=$("$ANCHOR_VENV_PYTHON" -c 'import torch; print(torch.__version__.split("+")[0])' 2>/dev/null) ;;
	1) v=$(/usr/bin/python3 -c 'import torch; print(torch.__version__.split("a")[0])' 2>/dev/null) ;; esac
	if "$tmp/torchrun-$a" --help >/dev/null 2>&1; then
		anchors="$anchors $a"
		eval "aname_$a=\"torchrun \${v:-?}\""
	else
		echo "   torchrun anchor $a unavailable ($(sed -n 2p "$tmp/torchrun-$a")): left out"
	fi
done
[ -n "$anchors" ] || echo "   no torchrun anchor: crun's figures alone"
# anchor_ok A LABEL RESULT: anchor A worked, or it is dropped from anchors.
anchor_ok() {
	_ok=$(field ok "$3")
	if [ "${_ok:-0}" -gt 0 ]; then
		return 0
	fi
	echo "   $(aname "$1") $2: FAILED ($3); log: $(tails "$tmp"/anchor*.0 "$tmp"/g/*.log)"
	echo "   $(aname "$1") does not work here: left out from now on"
	anchors=$(echo " $anchors " | sed "s/ $1 / /")
	return 1
}
aname() { eval "echo \${aname_$1:-}"; }
has() { case " $anchors " in *" $1 "*) return 0 ;; esac; return 1; }

###########################################################################
echo "== standalone, 4 workers (crun: median of $RUNS; torchrun: $ANCHOR_RUNS) [load $(load)]"
S="--standalone --nproc_per_node=4"
drv repeat "$RUNS" 30 "$tmp/crun" -- "$CRUN" $S /bin/true \
	-- "$CRUN" $S --max_restarts=1 "$FW" fail-if-attempt 0 3 \
	-- /bin/sh -c '/bin/true & /bin/true & /bin/true & /bin/true & wait'
out=$(got)
c_plain=$(lineof 1 "$out") c_fail=$(lineof 2 "$out") f_plain=$(lineof 3 "$out")
crun_ok "plain" "$c_plain" "$tmp/crun.0" || c_plain=""
crun_ok "fail+restart" "$c_fail" "$tmp/crun.1" || c_fail=""
cp=$(field median_ms "$c_plain") cf=$(field median_ms "$c_fail") fp=$(field median_ms "$f_plain")
echo "   crun     /bin/true:            $c_plain"
echo "   crun     fail once + restart:  $c_fail"
echo "   floor    sh, 4 x /bin/true &:  $f_plain"
for a in $anchors; do
	ANCHOR=$tmp/torchrun-$a
	n=$(aname $a)
	if has $a; then
		drv repeat "$ANCHOR_RUNS" 120 "$tmp/anchor" -- "$ANCHOR" $S --no_python /bin/true
		t_plain=$(got)
		echo "   $n /bin/true:            $t_plain"
		anchor_ok $a plain "$t_plain" && eval "tp_$a=\$(field median_ms \"\$t_plain\")"
	fi
	if has $a && [ "$ANCHOR_FAST_RUNS" -gt 0 ]; then
		drv repeat "$ANCHOR_FAST_RUNS" 120 "$tmp/anchor" -- "$ANCHOR" $S \
			--monitor_interval=0.1 --no_python /bin/true
		t_fast=$(got)
		echo "   $n --monitor_interval=0.1: $t_fast"
		anchor_ok $a fast "$t_fast" && eval "tfast_$a=\$(field median_ms \"\$t_fast\")"
	fi
	if has $a; then
		drv repeat "$ANCHOR_FAIL_RUNS" 180 "$tmp/anchor" -- "$ANCHOR" $S --max_restarts=1 \
			--no_python /bin/sh -c '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 3; exit 0'
		t_fail=$(got)
		echo "   $n fail once + restart:  $t_fail"
		anchor_ok $a fail "$t_fail" && eval "tf_$a=\$(field median_ms \"\$t_fail\")"
	fi
done

echo "== agent peak RSS (VmHWM of the agent alone; 4 workers sleep 300 ms) [load $(load)]"
c_rss=""
for i in 1 2 3; do
	drv hwm 30 "$tmp/hwm" -- "$CRUN" $S "$FW" sleep 300
	r=$(got)
	if [ "$(field rc "$r")" != 0 ]; then
		echo "   crun: FAILED ($r); log: $(tails "$tmp/hwm")"
		broken=1
		break
	fi
	v=$(field vmhwm_kb "$r")
	[ -z "$c_rss" ] || [ "$v" -gt "$c_rss" ] && c_rss=$v
done
echo "   crun     vmhwm_kb=${c_rss:--} (max of 3 runs)"
for a in $anchors; do
	drv hwm 120 "$tmp/hwm" -- "$tmp/torchrun-$a" $S --no_python "$FW" sleep 300
	r=$(got)
	eval "t_rss_$a=\$(field vmhwm_kb \"\$r\")"
	echo "   $(aname $a) $r"
done

###########################################################################
mkdir -p "$tmp/g"
# group LAUNCHER N RUNS TIMEOUT [-- ARGV...]: N agents on loopback, one
# /bin/true each (LAUNCHER: crun, or an anchor's number); for crun, the
# command lines after it take turns with it (a result line each).
group() {
	rm -f "$tmp"/g/*.log
	if [ "$1" = crun ]; then
		_n=$2 _runs=$3 _to=$4
		shift 4
		# Further command lines (after --) take turns with crun's.
		drv group "$_n" "$_runs" "$_to" "$tmp/g" -- "$CRUN" --nnodes="$_n" --nproc_per_node=1 \
			--rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:@PORT@ --rdzv_id=@ID@ \
			${GROUP_CONF:+--rdzv_conf="$GROUP_CONF"} /bin/true "$@"
	else
		drv group "$2" "$3" "$4" "$tmp/g" -- "$tmp/torchrun-$1" --nnodes="$2" --nproc_per_node=1 \
			--rdzv_backend=c10d --rdzv_endpoint=127.0.0.1:@PORT@ --rdzv_id=@ID@ \
			--no_python /bin/true
	fi
}
# A failed or hung crun group: keep its logs' gist.
group_check() {
	if crun_ok "N=$1" "$2" "$tmp"/g/*.log; then
		return 0
	fi
	grep -h -v "^crun: round [0-9]*: group rank" "$tmp"/g/*.log 2>/dev/null | sort | uniq -c |
		sort -rn | head -n 5 | sed 's/^/      /'
	return 1
}

echo "== N agents on loopback, one /bin/true worker each (crun: median of $GROUP_RUNS; torchrun: $ANCHOR_GROUP_RUNS) [load $(load)]"
for n in $SIZES; do
	group crun "$n" "$GROUP_RUNS" $((30 + n / 10))
	r=$(got)
	echo "   crun     $r"
	group_check "$n" "$r" && eval "gc_$n=\$(field median_ms \"\$r\")"
	for a in $anchors; do
		group $a "$n" "$ANCHOR_GROUP_RUNS" 300
		r=$(got)
		echo "   $(aname $a) $r"
		anchor_ok $a "N=$n" "$r" && eval "gt_${a}_$n=\$(field median_ms \"\$r\")"
	done
done
echo "== crun alone, many agents, and their floor (median of $BIG_RUNS; ulimit -n $(ulimit -n)) [load $(load)]"
for n in $BIG_SIZES; do
	# crun and the floor take turns, run by run.
	group crun "$n" "$BIG_RUNS" $((30 + n / 10)) -- /bin/sh -c '/bin/true & wait'
	out=$(got)
	r=$(lineof 1 "$out") f=$(lineof 2 "$out")
	echo "   crun     $r"
	echo "   floor    $f"
	group_check "$n" "$r" && eval "gc_$n=\$(field median_ms \"\$r\")"
	eval "gf_$n=\$(field median_ms \"\$f\")"
done

echo "== node loss (3 agents --nnodes=2:3, kill -9 of a non-host agent; median of $REFORM_RUNS) [load $(load)]"
drv reform "$REFORM_RUNS" 60 "$tmp" "$REFORM_LAST_CALL" "$CRUN" "$FW"
rf=$(got)
echo "   crun     $rf"
if [ "$(field ok "$rf")" != "$REFORM_RUNS" ]; then
	broken=1
	for f in "$tmp"/reform*.log; do
		[ -f "$f" ] || continue
		echo "      $(basename "$f"):"
		sed 's/^/         /' "$f" | head -n 30
	done
fi

###########################################################################
echo "== agent bench: summary"
# One column of figures and one of ratios (torchrun / crun) per anchor, the
# reference (2.x) first.
hdr="$(printf '   %-40s %10s' figure crun)"
for a in 2 1; do
	[ -n "$(aname $a)" ] && hdr="$hdr$(printf ' %16s %8s' "$(aname $a)" ratio)"
done
echo "$hdr"
# row LABEL CRUN VAR: VAR_<anchor> holds each anchor's figure.
row() {
	_l=$(printf '   %-40s %10s' "$1" "${2:--}")
	for a in 2 1; do
		[ -n "$(aname $a)" ] || continue
		_t=""
		[ -z "${3:-}" ] || eval "_t=\${${3}_$a:-}"
		_r=$(ratio "$_t" "$2" 0)
		_l="$_l$(printf ' %16s %8s' "${_t:--}" "${_r:--}")"
	done
	echo "$_l"
}
c_extra=$(calc "a - b" "$cf" "$cp")
for a in 1 2; do
	eval "t_extra_$a=\$(calc 'a - b' \"\${tf_$a:-}\" \"\${tp_$a:-}\" '' 0)"
done
row "standalone 4x /bin/true, ms" "$cp" tp
row "  floor: sh, 4 x /bin/true &, ms" "$fp"
row "  torchrun --monitor_interval=0.1, ms" "$cp" tfast
row "fail + restart, extra ms" "$c_extra" t_extra
row "agent peak RSS, KB" "$c_rss" t_rss
for n in $SIZES $BIG_SIZES; do
	eval "c=\${gc_$n:-} gtn_2=\${gt_2_$n:-} gtn_1=\${gt_1_$n:-}"
	row "$n agents on loopback, ms" "$c" gtn
	eval "f=\${gf_$n:-}"
	[ -n "$f" ] && row "  floor: $n shells forking /bin/true, ms" "$f"
done
row "node loss: detected, ms (median)" "$(field detect_ms "$rf")"
row "node loss: detected, ms (worst run)" "$(field detect_max_ms "$rf")"
row "node loss: re-forming logged, ms" "$(field reform_ms "$rf")"
row "node loss: survivors exited 0, ms" "$(field exit_ms "$rf")"

# The reference: torchrun 2.x when it ran, else 1.13 (its figures in the
# variables the targets read).
ref=""
for a in 2 1; do has $a && { ref=$a; break; }; done
eval "tp=\${tp_$ref:-} tfast=\${tfast_$ref:-} t_extra=\${t_extra_$ref:-} t_rss=\${t_rss_$ref:-}"
[ -n "$ref" ] && echo "   targets judged against $(aname $ref)"

# Against the reference's best case when it ran, else its default flags.
tbest=${tfast:-$tp}
[ -n "$tfast" ] && [ -n "$tp" ] && le "$tp" "$tfast" && tbest=$tp
echo "targets"
if [ -z "$cp" ]; then s=MISS; elif [ -z "$tbest" ]; then s=n/a; else s=$(pm ge "$(ratio "$tbest" "$cp")" 90); fi
verdict "(2a) standalone >= 90x faster than torchrun (x$(ratio "$tbest" "$cp" 0))" "$s"
[ -z "$tbest" ] && verdict "(2a) crun standalone 4 workers: $cp ms (no anchor)" n/a
sr=$(ratio "$cp" "$fp" 2)
verdict "(5) standalone <= 1.5x its floor (${cp:--} / ${fp:--} ms = x${sr:--})" "$(pm le "$sr" 1.5)"
verdict "(2b) failure + restart <= 10 ms extra (${c_extra:--} ms)" "$(pm le "$c_extra" 10)"
verdict "(2c) agent peak RSS <= 5 MB (${c_rss:--} KB)" "$(pm le "$c_rss" 5120)"
verdict "(4) 16 agents <= 100 ms (${gc_16:--} ms)" "$(pm le "${gc_16:-}" 100)"
verdict "(4) 1024 agents <= 3 s (${gc_1024:--} ms)" "$(pm le "${gc_1024:-}" 3000)"
gr=$(ratio "${gc_1024:-}" "${gf_1024:-}" 2)
case " $BIG_SIZES " in *" 1024 "*)
	verdict "(5) 1024 agents <= 2.0x their floor (${gc_1024:--} / ${gf_1024:--} ms = x${gr:--})" "$(pm le "$gr" 2.0)" ;;
esac
verdict "(4) node loss detected <= 2 s (worst run $(field detect_max_ms "$rf") ms)" \
	"$(pm le "$(field detect_max_ms "$rf")" 2000)"

# One machine-readable line per figure.
res() { echo "RESULT agent.$*"; }
for a in 2 1; do
	[ -n "$(aname $a)" ] || continue
	eval "res \"anchor_$a name=\$(aname $a | tr ' ' _) standalone4_ms=\${tp_$a:-} fast_ms=\${tfast_$a:-} restart_extra_ms=\${t_extra_$a:-} rss_kb=\${t_rss_$a:-}\""
done
res "standalone4_true crun_ms=${cp:-} anchor_ms=${tp:-} anchor_fast_ms=${tfast:-} ratio=$(ratio "$tbest" "$cp" 0) target=90x status=$(if [ -z "$tbest" ]; then echo n/a; else pm ge "$(ratio "$tbest" "$cp")" 90; fi)"
res "standalone4_floor crun_ms=${cp:-} floor_ms=${fp:-} ratio=${sr:-} target=1.5x status=$(pm le "$sr" 1.5)"
res "restart_extra crun_ms=${c_extra:-} anchor_ms=${t_extra:-} target_ms=10 status=$(pm le "$c_extra" 10)"
res "peak_rss crun_kb=${c_rss:-} anchor_kb=${t_rss:-} target_kb=5120 status=$(pm le "$c_rss" 5120)"
for n in $SIZES $BIG_SIZES; do
	eval "c=\${gc_$n:-}"
	case $n in 16) st=" target_ms=100 status=$(pm le "$c" 100)" ;;
	1024) st=" target_ms=3000 status=$(pm le "$c" 3000)" ;; *) st="" ;; esac
	eval "t=\${gt_${ref}_$n:-}"
	res "loopback_$n crun_ms=$c anchor_ms=$t ratio=$(ratio "$t" "$c" 0)$st"
	eval "f=\${gf_$n:-}"
	if [ -n "$f" ]; then
		st=""
		[ "$n" = 1024 ] && st=" target=2.0x status=$(pm le "$(ratio "$c" "$f" 2)" 2.0)"
		res "loopback_${n}_floor crun_ms=$c floor_ms=$f ratio=$(ratio "$c" "$f" 2)$st"
	fi
done
res "node_loss detect_ms=$(field detect_ms "$rf") detect_max_ms=$(field detect_max_ms "$rf") reform_ms=$(field reform_ms "$rf") exit_ms=$(field exit_ms "$rf") last_call_s=$REFORM_LAST_CALL target_ms=2000 status=$(pm le "$(field detect_max_ms "$rf")" 2000)"

if [ $broken -ne 0 ]; then
	echo "agent bench: crun failed or hung in some runs (see FAILED above)"
	exit 1
fi
if [ $misses -ne 0 ]; then
	echo "agent bench: $misses stated target(s) missed (MISS above)"
	exit 1
fi
exit 0
