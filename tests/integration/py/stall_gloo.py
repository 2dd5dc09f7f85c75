#!/usr/bin/python3
"""A gloo job that hangs once (tests/integration/stall.sh, tests/bench).

Every rank does a few all_reduce steps. On the first attempt
(TORCHELASTIC_RESTART_COUNT 0) the rank named by STALL_RANK skips the
all_reduce of step 1 and blocks on an event nobody sets, so the others wait
in that all_reduce for ever (gloo's timeout is an hour here); on later
attempts every rank runs through. STALL_BUSY=<seconds> instead makes rank 0
busy that long (a CPU loop, or writing a file with STALL_BUSY_IO=1) before
a barrier the others wait in: a slow rank, not a hang.
"""
import os
import sys
import threading
import time
from datetime import timedelta

import torch
import torch.distributed as dist


def blocked():
    threading.Event().wait()


def busy(secs, path):
    end = time.monotonic() + secs
    if path:
        with open(path, "wb") as f:
            while time.monotonic() < end:
                f.write(b"x" * (1 << 20))
                f.flush()
                os.fsync(f.fileno())
                f.seek(0)
    else:
        n = 0
        while time.monotonic() < end:
            n += 1


dist.init_process_group("gloo", timeout=timedelta(seconds=3600))
rank = dist.get_rank()
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
stall_rank = int(os.environ.get("STALL_RANK", "-1"))
busy_s = float(os.environ.get("STALL_BUSY", "0"))
print(f"rank {rank}: attempt {attempt} running", flush=True)
t = torch.ones(4)
if busy_s > 0:
    if rank == 0:
        busy(busy_s, os.environ.get("STALL_BUSY_IO") and
             os.path.join(os.environ.get("STALL_DIR", "/tmp"), "busy.%d" % os.getpid()))
    dist.barrier()
for step in range(3):
    if step == 1 and rank == stall_rank and attempt == 0:
        print(f"rank {rank}: skipping all_reduce", flush=True)
        blocked()
    dist.all_reduce(t)
print(f"rank {rank}: attempt {attempt} done {t.tolist()}", flush=True)
dist.barrier()
dist.destroy_process_group()
sys.exit(0)
