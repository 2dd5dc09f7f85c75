# The console collapse with real PyTorch ranks (console_collapse.sh): every
# rank warns alike and prints the same config, reduces a tensor in a real
# gloo group and draws a tqdm bar on stderr; then rank 1 raises a KeyError
# where the others raise a ValueError. With COLLAPSE_FLOOD=R, rank R first
# prints 5000 lines of its own on stdout.
import os
import sys
import warnings
import torch
import torch.distributed as dist
from tqdm import tqdm


dist.init_process_group("gloo")
rank = dist.get_rank()
warnings.warn("the same warning from every rank")
print("config: lr=0.1 batch=32", flush=True)
t = torch.ones(1)
dist.all_reduce(t)
print(f"world sum {int(t.item())}", flush=True)
if str(rank) == os.environ.get("COLLAPSE_FLOOD"):
    for i in range(5000):
        print(f"flood {i}")
    sys.stdout.flush()
for _ in tqdm(range(3), desc="steps", file=sys.stderr, mininterval=0):
    dist.barrier()


def fail():
    if rank == 1:
        raise KeyError("rank one's own error")
    raise ValueError("the common error")


fail()
