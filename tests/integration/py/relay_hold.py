"""A gloo worker for the store relay's suite (relay.sh): init_process_group
from the environment crun exports, an all_reduce, then it writes
DIR/ready.<RANK> (with its MASTER_ADDR and MASTER_PORT) and waits, for at most
60 s, until DIR/go exists (the test looks at the store meanwhile); then a
barrier and a second all_reduce through the same store, and DIR/done.<RANK>
with the sums. --hang-on-attempt N hangs instead of finishing on restart
attempt N (a node is then killed, and the others must re-form)."""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--hang-on-attempt", type=int, default=-1)
    args = ap.parse_args()
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    with open(os.path.join(args.dir, "ready.%d" % rank), "w") as f:
        f.write("attempt %d world %d addr %s port %s\n" % (
            attempt, world, os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]))
    if attempt == args.hang_on_attempt:
        time.sleep(600)
        sys.exit(9)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(args.dir, "go")):
        if time.time() > deadline:
            sys.exit(8)
        time.sleep(0.05)
    dist.barrier()
    u = torch.tensor([1.0])
    dist.all_reduce(u)
    with open(os.path.join(args.dir, "done.%d" % rank), "w") as f:
        f.write("rank %d/%d attempt %d sum %d want %d count %d\n" % (
            rank, world, attempt, int(t.item()), world * (world + 1) // 2, int(u.item())))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
