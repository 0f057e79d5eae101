"""What the two-process tests (DDP, FSDP2, DTensor) share: launching two spawned workers on loopback,
each worker's gloo process group, and the tiny regression problem they train on."""
import datetime
import gc
import os
import socket
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import rmsnorm

TIMEOUT_S = 240
STEPS = 3


def run_two(worker_run, out_dir, what):
    """Runs worker_run(rank, 2, port, out_dir) in two spawned processes; fails the test after TIMEOUT_S."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.start_processes(worker_run, args=(2, port, str(out_dir)), nprocs=2, join=False, start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not ctx.join(timeout=5):
            if time.monotonic() > deadline:
                pytest.fail(f"{what} workers did not finish in {TIMEOUT_S} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()


def run_in_group(rank, world, port, body, *args):
    """body(*args) in a worker's gloo group on loopback, one thread for torch and for our kernels.

    body's objects (models, meshes, pending work) die when it returns, before the group is torn
    down: left alive, they are freed at interpreter exit, after the group, where a worker once died
    of SIGABRT ("terminate called without an active exception") in a CI run. Then both workers meet
    at a barrier, so neither tears the group down while the other may still talk to it."""
    if sys.platform.startswith("linux"):
        # Keep gloo's connections on the loopback device: a sandbox may have no other usable interface.
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    torch.set_num_threads(1)
    rmsnorm.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    try:
        body(*args)
        gc.collect()  # FSDP's modules and hooks hold reference cycles
        dist.barrier()
    finally:
        dist.destroy_process_group()


def make_data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(8, 16, generator=g), torch.randn(8, 4, generator=g)


def train(model, x, y):
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(STEPS):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
