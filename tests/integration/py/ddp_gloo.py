"""A real PyTorch job for crun's tests and demo: gloo process group from the
environment crun exports (init_method="env://"), an all_reduce, and a few
DistributedDataParallel steps. Each rank prints one result line; with
--out DIR it also writes DIR/rank.<RANK> so tests can check every rank.
--fail-on-attempt N makes local rank 0 exit 3 on restart attempt N (to test
restarts in agent-store mode)."""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--fail-on-attempt", type=int, default=-1)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()

    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if attempt == args.fail_on_attempt and os.environ["LOCAL_RANK"] == "0":
        print("failing on purpose on attempt %d" % attempt, file=sys.stderr)
        sys.exit(3)

    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    assert rank == int(os.environ["RANK"]) and world == int(os.environ["WORLD_SIZE"])

    # all_reduce: every rank contributes rank+1; the sum is world*(world+1)/2.
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    want = world * (world + 1) / 2

    # DDP: gradients are averaged, so every replica ends with equal weights.
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(args.steps):
        x = torch.full((8, 4), float(rank + 1))
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    w = model.module.weight.detach().clone()
    ws = [torch.zeros_like(w) for _ in range(world)]
    dist.all_gather(ws, w)
    same = all(torch.allclose(ws[0], o) for o in ws)

    line = "rank %d/%d attempt %d sum %g want %g replicas_equal %s store %s" % (
        rank, world, attempt, t.item(), want, same,
        os.environ.get("TORCHELASTIC_USE_AGENT_STORE"))
    print(line, flush=True)
    if args.out:
        with open(os.path.join(args.out, "rank.%d" % rank), "w") as f:
            f.write(line + "\n")
    dist.barrier()
    dist.destroy_process_group()
    if t.item() != want or not same:
        sys.exit(1)


if __name__ == "__main__":
    main()
