"""DTensor: our ops carry a sharding rule, so inputs sharded on rows stay sharded (2 gloo processes)."""
import pytest
import torch

import _gloo
import _dtensor_worker as worker


def dtensor_available():
    try:
        from torch.distributed.tensor.experimental import register_sharding  # noqa: F401
    except ImportError:
        return False
    return torch.distributed.is_available()


@pytest.mark.skipif(not dtensor_available(), reason="torch.distributed.tensor not available")
def test_row_sharded_dtensor_stays_sharded(tmp_path):
    _gloo.run_two(worker.run, tmp_path, "DTensor")
    assert (tmp_path / "ok0").exists() and (tmp_path / "ok1").exists()
