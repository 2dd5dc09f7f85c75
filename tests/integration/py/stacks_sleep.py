"""A worker for status_stacks.sh: it records its pid, then waits for DIR/stop
in a known function (rank 1 in straggle, every other rank in barrier), and
writes its restart count to DIR/done.RANK when it leaves.

usage: stacks_sleep.py DIR
"""
import os
import sys
import time


def barrier(d):
    while not os.path.exists(os.path.join(d, "stop")):
        time.sleep(0.05)


def straggle(d):
    while not os.path.exists(os.path.join(d, "stop")):
        time.sleep(0.05)


def main():
    d, rank = sys.argv[1], os.environ["RANK"]
    with open(os.path.join(d, "pid." + rank), "w") as f:
        f.write(str(os.getpid()))
    if rank == "1":
        straggle(d)
    else:
        barrier(d)
    with open(os.path.join(d, "done." + rank), "w") as f:
        f.write(os.environ["TORCHELASTIC_RESTART_COUNT"])


main()
