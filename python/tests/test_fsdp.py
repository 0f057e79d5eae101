"""Two gloo processes under FSDP2 (fully_shard) reach the weights one process reaches on the full batch."""
import pytest
import torch

import _gloo
import _fsdp_worker as worker


def fsdp2_available():
    try:
        from torch.distributed.fsdp import fully_shard  # noqa: F401
    except ImportError:
        return False
    return torch.distributed.is_available()


@pytest.mark.skipif(not fsdp2_available(), reason="torch.distributed.fsdp.fully_shard not available")
def test_fsdp2_two_processes_equal_one(tmp_path):
    _gloo.run_two(worker.run, tmp_path, "FSDP")
    got = torch.load(tmp_path / "fsdp.pt", weights_only=True)

    single = worker.make_model()
    x, y = _gloo.make_data()
    _gloo.train(single, x, y)
    expect = single.state_dict()

    assert list(got) == list(expect)
    for name in expect:
        torch.testing.assert_close(got[name], expect[name], rtol=1e-5, atol=1e-6)
    # Training moved every norm's gain: the check above is not comparing initial weights.
    for name in ("norm1.weight", "norm2.weight", "ln.weight"):
        assert not torch.equal(expect[name], torch.ones(32)), name
