"""DTensor: our ops carry a sharding rule, so inputs sharded on rows stay sharded (2 gloo processes)."""
import socket
import time

import pytest
import torch
import torch.multiprocessing as mp

import _dtensor_worker as worker

TIMEOUT_S = 240


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dtensor_available():
    try:
        from torch.distributed.tensor.experimental import register_sharding  # noqa: F401
    except ImportError:
        return False
    return torch.distributed.is_available()


@pytest.mark.skipif(not dtensor_available(), reason="torch.distributed.tensor not available")
def test_row_sharded_dtensor_stays_sharded(tmp_path):
    ctx = mp.start_processes(worker.run, args=(2, free_port(), str(tmp_path)), nprocs=2, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not ctx.join(timeout=5):
            if time.monotonic() > deadline:
                pytest.fail(f"DTensor workers did not finish in {TIMEOUT_S} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
    assert (tmp_path / "ok0").exists() and (tmp_path / "ok1").exists()
