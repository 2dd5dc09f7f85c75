# A worker that hangs where the stacks must show it: every rank but 0
# ignores SIGTERM and sleeps in hang_here() (its pid in DIR/pid.<rank>);
# rank 0 exits 3 once DIR/go exists, which stops the group. On a restart
# every rank exits 0 at once.
import os
import signal
import sys
import time

d = sys.argv[1]
rank = int(os.environ["LOCAL_RANK"])


def hang_here():
    time.sleep(1000)  # HANG_LINE


if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0:
    sys.exit(0)
if rank == 0:
    with open(os.path.join(d, "fh.%d" % rank), "w") as f:
        f.write(os.environ.get("PYTHONFAULTHANDLER", "<unset>"))
    while not os.path.exists(os.path.join(d, "go")):
        time.sleep(0.05)
    sys.exit(3)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
with open(os.path.join(d, "pid.tmp"), "w") as f:
    f.write(str(os.getpid()))
os.rename(os.path.join(d, "pid.tmp"), os.path.join(d, "pid.%d" % rank))
hang_here()
