"""FSDP2 (fully_shard) training in one of two gloo processes, for test_fsdp.py (spawned, so importable by name)."""
import os

import torch
from torch import nn

import rmsnorm.torch as rt

import _gloo


class Block(nn.Module):
    """A pre-norm residual block with our RMSNorm, the fused residual add and our LayerNorm."""

    def __init__(self, d=32):
        super().__init__()
        self.inp = nn.Linear(16, d)
        self.norm1 = rt.RMSNorm(d, partial=0.5)
        self.mlp = nn.Linear(d, d)
        self.norm2 = rt.FusedAddRMSNorm(d)
        self.ln = rt.LayerNorm(d)
        self.out = nn.Linear(d, 4)

    def forward(self, x):
        h = self.inp(x)
        y, h = self.norm2(self.mlp(torch.relu(self.norm1(h))), h)
        return self.out(self.ln(y + h))


def make_model():
    torch.manual_seed(0)
    return Block()


def train_and_save(rank, world, out_dir):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh("cpu", (world,))
    model = make_model()
    # Each norm its own FSDP unit, so its parameters are sharded, gathered for the forward and
    # their gradients reduce-scattered on their own; then the rest at the root.
    for m in (model.norm1, model.norm2, model.ln):
        fully_shard(m, mesh=mesh)
    fully_shard(model, mesh=mesh)
    x, y = _gloo.make_data()
    per = x.shape[0] // world
    _gloo.train(model, x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per])
    full = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in model.state_dict().items()}
    if rank == 0:
        torch.save(full, os.path.join(out_dir, "fsdp.pt"))


def run(rank, world, port, out_dir):
    _gloo.run_in_group(rank, world, port, train_and_save, rank, world, out_dir)
