"""torch.distributed.checkpoint across an elastic scale-down. Every step
all-reduces ones into w (so w counts steps whatever the world size) and saves
{w, step} with dcp.save to CKPT/step_<n>, rank 0 then writing CKPT/latest. On
the first attempt the workers stop after step HANG_AT (a node is then killed
by the test); on a later attempt they load the latest checkpoint with the new
world size and go on to step LAST. Each rank then writes OUT.<rank> as
"world loaded_step w step".

    fw_dcp.py CKPT OUT HANG_AT LAST
"""
import os, sys, time

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp

ckpt, out, hang_at, last = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
state = {"w": torch.zeros(4), "step": torch.zeros(1, dtype=torch.int64)}
loaded = -1
if os.path.exists(os.path.join(ckpt, "latest")):
    with open(os.path.join(ckpt, "latest")) as f:
        n = int(f.read())
    dcp.load(state, checkpoint_id=os.path.join(ckpt, "step_%d" % n))
    loaded = int(state["step"])
while int(state["step"]) < last:
    one = torch.ones(4)
    dist.all_reduce(one)
    state["w"] += one / world
    state["step"] += 1
    n = int(state["step"])
    dcp.save(state, checkpoint_id=os.path.join(ckpt, "step_%d" % n))
    dist.barrier()
    if rank == 0:
        with open(os.path.join(ckpt, "latest.tmp"), "w") as f:
            f.write(str(n))
        os.rename(os.path.join(ckpt, "latest.tmp"), os.path.join(ckpt, "latest"))
    if loaded < 0 and n == hang_at:
        time.sleep(120)  # until the node loss restarts this worker
with open("%s.%d" % (out, rank), "w") as f:
    f.write("%d %d %s %d\n" % (world, loaded, ",".join("%g" % v for v in state["w"].tolist()),
                               int(state["step"])))
dist.destroy_process_group()
