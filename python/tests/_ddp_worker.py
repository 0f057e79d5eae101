"""A DDP training step in one of two gloo processes, for test_ddp.py (spawned, so importable by name)."""
import datetime
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

import rmsnorm
import rmsnorm.torch as rt

STEPS = 3


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), rt.RMSNorm(32, partial=0.5), nn.GELU(), rt.LayerNorm(32),
                         nn.Linear(32, 4))


def make_data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def train(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()


def run(rank, world, port, out_dir):
    if sys.platform.startswith("linux"):
        # Keep gloo's connections on the loopback device: a sandbox may have no other usable interface.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    rmsnorm.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        model = nn.parallel.DistributedDataParallel(make_model())
        x, y = make_data()
        per = x.shape[0] // world
        train(model, x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per])
        torch.save(model.module.state_dict(), os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        dist.destroy_process_group()
