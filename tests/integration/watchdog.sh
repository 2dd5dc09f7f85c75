#!/bin/sh
# needs: torch
# torchrun's FileTimer watchdog: with TORCHELASTIC_ENABLE_FILE_TIMER=1 crun
# serves the FIFO named in the workers' TORCHELASTIC_TIMER_FILE. Real
# torch.distributed.elastic.timer.FileTimerClient calls from the workers: an
# expired timer kills its worker (and the job fails with its signal), a
# released one never fires; a request for a pid that is not a worker, or
# bytes that are not a request, are refused and harm nothing.
. tests/integration/lib.sh
need_torch

cat >"$T/wd.py" <<'EOF2'
import json, os, sys, time
from torch.distributed.elastic.timer import FileTimerClient, configure, expires
path = os.environ["TORCHELASTIC_TIMER_FILE"]
configure(FileTimerClient(path))
mode, r = sys.argv[1], int(os.environ["LOCAL_RANK"])
if mode == "ok":
    with expires(after=2, scope="step"):
        time.sleep(0.2)
    time.sleep(3)  # past the released timer's expiration
    print("rank", r, "finished", flush=True)
elif mode == "stuck":
    if r == 1:
        with expires(after=1, scope="allreduce"):
            time.sleep(60)
    time.sleep(60)
elif mode == "hostile":
    # A timer for somebody else's process, already expired, and garbage.
    victim = int(sys.argv[2])
    with open(path, "w") as f:
        f.write(json.dumps({"version": 1, "pid": victim, "scope_id": "x",
                            "expiration_time": time.time() - 1, "signal": 9}) + "\n")
    with open(path, "w") as f:
        f.write("this is not json\n")
    time.sleep(2)
    print("rank", r, "survived", flush=True)
EOF2

# 1. A stuck rank is killed when its timer expires: the job fails with
# SIGKILL's status, naming the scope and the rank.
s=$(date +%s)
TORCHELASTIC_ENABLE_FILE_TIMER=1 TORCHELASTIC_TIMER_FILE=$T/fifo timeout 60 \
	"$CRUN" --standalone --nproc_per_node=2 "$T/wd.py" stuck >"$T/o1" 2>&1
rc=$?
el=$(( $(date +%s) - s ))
expect_eq "stuck job's status (SIGKILL)" "$rc" 137
expect_grep "expiry named" "watchdog: timer 'allreduce' of rank 1 (pid [0-9]*) expired: sending SIGKILL" "$T/o1"
[ "$el" -lt 30 ] || fail "the stuck job took $el s to end (timer of 1 s)"
[ ! -e "$T/fifo" ] || fail "the FIFO named by TORCHELASTIC_TIMER_FILE was left behind"

# 2. Timers acquired and released: nothing fires, the job succeeds.
TORCHELASTIC_ENABLE_FILE_TIMER=1 timeout 60 "$CRUN" --standalone --nproc_per_node=2 \
	"$T/wd.py" ok >"$T/o2" 2>&1 || { cat "$T/o2"; fail "released timers failed the job"; }
expect_nogrep "no expiry" "expired" "$T/o2"
expect_eq "both finished" "$(grep -c '^rank [01] finished' "$T/o2")" 2

# 3. Hostile requests: a timer for a process that is not a worker, garbage.
sleep 60 &
victim=$!
at_exit "kill $victim"
TORCHELASTIC_ENABLE_FILE_TIMER=1 timeout 60 "$CRUN" --standalone "$T/wd.py" hostile $victim >"$T/o3" 2>&1 ||
	{ cat "$T/o3"; fail "hostile requests failed the job"; }
kill -0 $victim 2>/dev/null || fail "the watchdog killed a process that is not a worker"
expect_grep "foreign pid refused" "refusing a timer for pid $victim: not a worker of this agent" "$T/o3"
expect_grep "garbage ignored" "ignoring a request that is not a FileTimer request" "$T/o3"

# 4. Without TORCHELASTIC_ENABLE_FILE_TIMER the workers get no FIFO.
env -u TORCHELASTIC_ENABLE_FILE_TIMER -u TORCHELASTIC_TIMER_FILE "$CRUN" --standalone \
	"$FAKE_WORKER" env "$T/env" >"$T/o4" 2>&1 || fail "plain job failed"
expect_nogrep "no timer file" "^TORCHELASTIC_TIMER_FILE=" "$T/env.0"
exit 0
