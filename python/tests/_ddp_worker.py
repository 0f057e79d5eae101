"""A DDP training step in one of two gloo processes, for test_ddp.py (spawned, so importable by name)."""
import os

import torch
from torch import nn

import rmsnorm.torch as rt

import _gloo


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), rt.RMSNorm(32, partial=0.5), nn.GELU(), rt.LayerNorm(32),
                         nn.Linear(32, 4))


def train_and_save(rank, world, out_dir):
    model = nn.parallel.DistributedDataParallel(make_model())
    x, y = _gloo.make_data()
    per = x.shape[0] // world
    _gloo.train(model, x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per])
    torch.save(model.module.state_dict(), os.path.join(out_dir, f"rank{rank}.pt"))


def run(rank, world, port, out_dir):
    _gloo.run_in_group(rank, world, port, train_and_save, rank, world, out_dir)
