# A hang with a stopped rank (tests/integration/stall_stopped.sh): rank 1
# writes its pid to DIR/pid.1 and stops itself with SIGSTOP; every other rank
# sleeps in hang_here(). Neither makes progress, so the job is hung.
import os
import signal
import sys
import time

d = sys.argv[1]
rank = int(os.environ["LOCAL_RANK"])


def hang_here():
    time.sleep(1000)


if rank == 1:
    with open(os.path.join(d, "pid.tmp"), "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.path.join(d, "pid.tmp"), os.path.join(d, "pid.1"))
    os.kill(os.getpid(), signal.SIGSTOP)
    sys.exit(0)
hang_here()
