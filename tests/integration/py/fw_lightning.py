"""PyTorch Lightning, unmodified: a Trainer with DDP (gloo, CPU) across
NODES x 2 workers started by crun. Each rank writes OUT.<rank> as
"cluster world rank node_rank checksum" (checksum: of the trained weights,
the same on every rank when DDP kept them in step).

    fw_lightning.py OUT NODES
"""
import os, sys

import lightning as L
import torch
from lightning.pytorch.strategies import DDPStrategy
from torch.utils.data import DataLoader, TensorDataset


class Model(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 1)

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.mse_loss(self.lin(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


torch.manual_seed(0)
x = torch.randn(64, 8)
data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
torch.manual_seed(int(os.environ["RANK"]))  # different starting weights: DDP syncs them
trainer = L.Trainer(accelerator="cpu", devices=2, num_nodes=int(sys.argv[2]),
                    strategy=DDPStrategy(process_group_backend="gloo"), max_epochs=2,
                    enable_progress_bar=False, enable_model_summary=False,
                    enable_checkpointing=False, logger=False)
model = Model()
trainer.fit(model, data)
s = sum(float(p.detach().sum()) for p in model.parameters())
with open("%s.%d" % (sys.argv[1], trainer.global_rank), "w") as f:
    f.write("%s %d %d %d %.6f\n" % (type(trainer.strategy.cluster_environment).__name__,
                                    trainer.world_size, trainer.global_rank,
                                    trainer.node_rank, s))
# As in ddp_gloo.py: PyTorch 2.13's DDP keeps the gloo group's threads alive,
# and one of them may abort the process while the interpreter finalizes.
os._exit(0)
