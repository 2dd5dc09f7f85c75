"""A real PyTorch job for crun's tests and demo: gloo process group from the
environment crun exports (init_method="env://"), an all_reduce, and a few
DistributedDataParallel steps. Each rank prints one result line; with
--out DIR it also writes DIR/rank.<RANK> so tests can check every rank.
--fail-on-attempt N makes local rank 0 exit 3 on restart attempt N (to test
restarts in agent-store mode). The line also says whether new_group and the
object collectives (all_gather_object, broadcast_object_list) gave the right
answers, and whether this worker hosts the store server (listens on
MASTER_PORT): "store_server none" in agent-store mode, where no worker ever
builds a TCPStore server (the only place PyTorch 2.x's use_libuv picks an
implementation). The rank file's second line is the worker's USE_LIBUV."""
import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def listens_on(port):
    """This process holds a listening TCP socket on port."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            t = os.readlink("/proc/self/fd/" + fd)
        except OSError:
            continue
        if t.startswith("socket:["):
            inodes.add(t[8:-1])
    for f in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        try:
            lines = open(f).read().splitlines()[1:]
        except OSError:
            continue
        for l in lines:
            c = l.split()
            if c[3] == "0A" and int(c[1].rsplit(":", 1)[1], 16) == port and c[9] in inodes:
                return True
    return False


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--fail-on-attempt", type=int, default=-1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--init-method", default="env://")
    args = ap.parse_args()

    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    if attempt == args.fail_on_attempt and os.environ["LOCAL_RANK"] == "0":
        print("failing on purpose on attempt %d" % attempt, file=sys.stderr)
        sys.exit(3)

    dist.init_process_group("gloo", init_method=args.init_method)
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

    # new_group of the even ranks, and the object collectives.
    evens = list(range(0, world, 2))
    g = dist.new_group(evens)
    e = torch.tensor([float(rank)])
    if rank in evens:
        dist.all_reduce(e, group=g)
    group_ok = rank not in evens or e.item() == float(sum(evens))
    objs = [None] * world
    dist.all_gather_object(objs, {"rank": rank})
    bl = [{"from": rank, "attempt": attempt} if rank == 0 else None]
    dist.broadcast_object_list(bl, src=0)
    obj_ok = objs == [{"rank": r} for r in range(world)] and bl == [{"from": 0, "attempt": attempt}]
    server = listens_on(int(os.environ["MASTER_PORT"]))

    line = ("rank %d/%d attempt %d sum %g want %g replicas_equal %s store %s"
            " new_group %s objects %s store_server %s") % (
        rank, world, attempt, t.item(), want, same,
        os.environ.get("TORCHELASTIC_USE_AGENT_STORE"),
        "ok" if group_ok else "WRONG", "ok" if obj_ok else "WRONG",
        "here" if server else "none")
    print(line, flush=True)
    if args.out:
        with open(os.path.join(args.out, "rank.%d" % rank), "w") as f:
            f.write(line + "\n")
            f.write("USE_LIBUV=%s\n" % os.environ.get("USE_LIBUV", "unset"))
    dist.barrier()
    dist.destroy_process_group()
    ok = t.item() == want and same and group_ok and obj_ok
    # PyTorch 2.13's DistributedDataParallel keeps the gloo group alive past
    # destroy_process_group: its worker thread may run the last collective's
    # callback after the interpreter began to finalize, which Python ends so
    # that the process aborts ("terminate called without an active
    # exception"; 3 of 21 runs of fw_accelerate.py under torchrun 2.13 on a
    # loaded machine). Everything is written: leave without finalizing.
    sys.stdout.flush()
    os._exit(0 if ok else 1)


if __name__ == "__main__":
    main()
