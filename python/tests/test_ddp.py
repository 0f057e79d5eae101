"""Two gloo processes under DistributedDataParallel reach the weights one process reaches on the full batch."""
import os
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp

import _ddp_worker as worker

TIMEOUT_S = 240


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_ddp_two_processes_equal_one(tmp_path):
    ctx = mp.start_processes(worker.run, args=(2, free_port(), str(tmp_path)), nprocs=2, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not ctx.join(timeout=5):
            if time.monotonic() > deadline:
                pytest.fail(f"DDP workers did not finish in {TIMEOUT_S} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
    states = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]

    single = worker.make_model()
    x, y = worker.make_data()
    worker.train(single, x, y)
    expect = single.state_dict()

    assert list(states[0]) == list(expect)
    for name in expect:
        # Both ranks hold the same weights (DDP's all-reduce), and they are one process's weights up to
        # the order of the gradient sums.
        torch.testing.assert_close(states[0][name], states[1][name], rtol=0, atol=0)
        torch.testing.assert_close(states[0][name], expect[name], rtol=1e-5, atol=1e-6)
    # Training moved the norms' gains: the check above is not comparing initial weights.
    assert not torch.equal(expect["1.weight"], torch.ones(32))
