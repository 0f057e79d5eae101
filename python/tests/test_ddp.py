"""Two gloo processes under DistributedDataParallel reach the weights one process reaches on the full batch."""
import pytest
import torch

import _gloo
import _ddp_worker as worker


@pytest.mark.skipif(not torch.distributed.is_available(), reason="torch.distributed not built")
def test_ddp_two_processes_equal_one(tmp_path):
    _gloo.run_two(worker.run, tmp_path, "DDP")
    states = [torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in range(2)]

    single = worker.make_model()
    x, y = _gloo.make_data()
    _gloo.train(single, x, y)
    expect = single.state_dict()

    assert list(states[0]) == list(expect)
    for name in expect:
        # Both ranks hold the same weights (DDP's all-reduce), and they are one process's weights up to
        # the order of the gradient sums.
        torch.testing.assert_close(states[0][name], states[1][name], rtol=0, atol=0)
        torch.testing.assert_close(states[0][name], expect[name], rtol=1e-5, atol=1e-6)
    # Training moved the norms' gains: the check above is not comparing initial weights.
    assert not torch.equal(expect["1.weight"], torch.ones(32))
