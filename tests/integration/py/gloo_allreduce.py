#!/usr/bin/python3
"""A gloo worker: env:// init, one all_reduce, barrier, destroy.

Started by tests with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
TORCHELASTIC_USE_AGENT_STORE=True, TORCHELASTIC_RESTART_COUNT set.
"""
from datetime import timedelta
import torch
import torch.distributed as dist

dist.init_process_group("gloo", timeout=timedelta(seconds=30))
rank = dist.get_rank()
t = torch.ones(4) * (rank + 1)
dist.all_reduce(t)
print(f"rank {rank}: all_reduce -> {t.tolist()}", flush=True)
dist.barrier()
dist.destroy_process_group()
print(f"rank {rank}: done", flush=True)
