#!/usr/bin/python3
"""A gloo worker for initdiag.sh: env:// init, one all_reduce whose sum is
checked, then --hold seconds (so the agents look at a connected group),
barrier, destroy. Writes DIR/rank.<RANK> with its result line."""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--hold", type=float, default=0)
args = ap.parse_args()

dist.init_process_group("gloo", init_method="env://")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
want = world * (world + 1) / 2
time.sleep(args.hold)
dist.barrier()
line = "rank %d/%d sum %g want %g" % (rank, world, t.item(), want)
with open(os.path.join(args.out, "rank.%d" % rank), "w") as f:
    f.write(line + "\n")
dist.destroy_process_group()
sys.exit(0 if t.item() == want else 1)
