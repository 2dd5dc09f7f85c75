"""A small real training job for crun: gloo DDP on synthetic data.

Every rank trains the same linear model on its own shard of a synthetic
regression problem (y = x . w_true + noise); DistributedDataParallel averages
the gradients over gloo. Rank 0 saves a checkpoint (model, optimizer, epoch)
after every epoch, atomically; a restarted group resumes from it, so a crash
costs at most one epoch. Each rank prints its step and loss.

    crun --standalone --nproc_per_node=4 examples/train.py --epochs 3
    crun configs/single-node.ini          # the same, from a job file

--fail-at-epoch E makes local rank 0 of node 0 exit 1 at the start of epoch E
in the first attempt only (TORCHELASTIC_RESTART_COUNT=0): with
--max_restarts >= 1 the group restarts and resumes from the last checkpoint.
"""
import argparse
import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES = 16


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--steps-per-epoch", type=int, default=20)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--checkpoint-dir", default=None,
                   help="where to save and resume (default: no checkpoints)")
    p.add_argument("--resume", action="store_true",
                   help="resume from the checkpoint when there is one")
    p.add_argument("--run-name", default="crun-example")
    p.add_argument("--fail-at-epoch", type=int, default=-1)
    p.add_argument("--step-delay", type=float, default=0.0,
                   help="seconds to sleep per step (to watch it run)")
    return p.parse_args()


def checkpoint_path(args):
    return os.path.join(args.checkpoint_dir, args.run_name + ".pt")


def load(args, model, opt):
    """The epoch to start from: 0, or the one after the last checkpoint."""
    if not args.checkpoint_dir or not args.resume:
        return 0
    path = checkpoint_path(args)
    if not os.path.exists(path):
        return 0
    state = torch.load(path)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    return state["epoch"] + 1


def save(args, model, opt, epoch):
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    path = checkpoint_path(args)
    tmp = path + ".tmp"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(),
                "epoch": epoch}, tmp)
    os.replace(tmp, path)


def main():
    args = parse_args()
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.manual_seed(1234)  # the same initial model and w_true everywhere
    w_true = torch.randn(FEATURES, 1)
    model = torch.nn.Linear(FEATURES, 1)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    start = load(args, model, opt)
    ddp = DDP(model)
    if start > 0:
        print(f"rank {rank}: resumed from {checkpoint_path(args)} at epoch "
              f"{start} (restart {restart})", flush=True)
    gen = torch.Generator().manual_seed(rank)  # each rank its own shard
    loss = torch.tensor(float("nan"))
    for epoch in range(start, args.epochs):
        if (epoch == args.fail_at_epoch and restart == 0 and
                os.environ.get("GROUP_RANK") == "0" and
                os.environ.get("LOCAL_RANK") == "0"):
            print(f"rank {rank}: failing on purpose at epoch {epoch}",
                  file=sys.stderr, flush=True)
            sys.exit(1)
        for step in range(args.steps_per_epoch):
            x = torch.randn(args.batch_size, FEATURES, generator=gen)
            y = x @ w_true + 0.01 * torch.randn(args.batch_size, 1,
                                                generator=gen)
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(ddp(x), y)
            loss.backward()
            opt.step()
            if args.step_delay:
                time.sleep(args.step_delay)
        # The loss averaged over every rank, so all ranks print one number.
        avg = loss.detach().clone()
        dist.all_reduce(avg)
        avg /= world
        print(f"rank {rank}/{world} epoch {epoch} step "
              f"{(epoch + 1) * args.steps_per_epoch} loss {avg.item():.6f}",
              flush=True)
        if rank == 0 and args.checkpoint_dir:
            save(args, model, opt, epoch)
        dist.barrier()  # nobody starts the next epoch before the save
    # Every rank holds the same parameters (DDP keeps them in sync).
    params = torch.cat([p.detach().flatten() for p in model.parameters()])
    total = params.clone()
    dist.all_reduce(total)
    in_sync = torch.allclose(total / world, params, atol=1e-6)
    print(f"rank {rank}: done, final loss {loss.item():.6f}, "
          f"replicas in sync: {in_sync}", flush=True)
    dist.destroy_process_group()
    return 0 if in_sync else 3


if __name__ == "__main__":
    sys.exit(main())
