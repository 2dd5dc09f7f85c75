"""HF accelerate, unmodified: Accelerator() in a plain script that crun
launches (ACCELERATE_USE_CPU=1 in its environment, as `accelerate
launch --cpu` sets: no GPU here). Each process writes OUT.<index> as "type processes index gathered
checksum" (gathered: every process's index, gathered; checksum: of the
weights after one prepared optimizer step, the same on every process).

    fw_accelerate.py OUT
"""
import os
import sys

import torch
from accelerate import Accelerator

acc = Accelerator()
torch.manual_seed(acc.process_index)  # different weights: prepare() syncs them
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model, opt = acc.prepare(model, opt)
x = torch.randn(8, 4, generator=torch.Generator().manual_seed(acc.process_index))
loss = model(x).pow(2).mean()
acc.backward(loss)
opt.step()
got = acc.gather(torch.tensor([acc.process_index])).tolist()
s = sum(float(p.detach().sum()) for p in model.parameters())
with open("%s.%d" % (sys.argv[1], acc.process_index), "w") as f:
    f.write("%s %d %d %s %.6f\n" % (acc.distributed_type, acc.num_processes,
                                    acc.process_index, ",".join(map(str, got)), s))
acc.wait_for_everyone()
torch.distributed.destroy_process_group()
# As in ddp_gloo.py: PyTorch 2.13's DDP keeps the gloo group's threads alive,
# and one of them may abort the process while the interpreter finalizes.
os._exit(0)
