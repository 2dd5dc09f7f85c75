"""A checkpointing gloo DDP trainer for crun's spare tests: a small model,
--steps steps of --step-ms each, rank 0 saving {step, model, optimizer} every
--every steps (torch.save to a temporary name, then an atomic rename), and
every rank resuming from the last checkpoint when it starts. Each rank
appends one line per step to DIR/steps: "<host> <attempt> <rank> <world>
<step> <unix ms>", and the loss of rank 0 is the same on every attempt for
a given step (the data is a function of the step)."""
import argparse
import os
import socket
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--every", type=int, default=5)
    ap.add_argument("--step-ms", type=int, default=100)
    args = ap.parse_args()

    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "?")
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    ckpt = os.path.join(args.dir, "ckpt.pt")
    start = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["step"] + 1
    host = socket.gethostname()
    log = open(os.path.join(args.dir, "steps"), "a", buffering=1)
    for step in range(start, args.steps):
        g = torch.Generator().manual_seed(step * 1000 + rank)
        x = torch.randn(16, 8, generator=g)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.write("%s %s %d %d %d %d\n" % (host, attempt, rank, world, step,
                                          int(time.time() * 1000)))
        if rank == 0 and step % args.every == 0:
            tmp = ckpt + ".tmp"
            torch.save({"step": step, "model": model.module.state_dict(),
                        "opt": opt.state_dict()}, tmp)
            os.replace(tmp, ckpt)
        time.sleep(args.step_ms / 1000)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
