"""Bad input to rmsnorm.torch raises a clear Python exception before any kernel runs."""
import pytest
import torch

import rmsnorm.torch as rt

FUNCS = [
    pytest.param(lambda x, s, w=None: rt.rms_norm(x, s, w), id="rms_norm"),
    pytest.param(lambda x, s, w=None: rt.layer_norm(x, s, w), id="layer_norm"),
]


@pytest.mark.parametrize("f", FUNCS)
def test_wrong_dtype(f):
    for dtype in (torch.float64, torch.int32, torch.complex64, torch.bool):
        with pytest.raises(TypeError, match="dtype"):
            f(torch.zeros(2, 4, dtype=dtype), (4,))
    with pytest.raises(TypeError, match="weight has dtype"):
        f(torch.zeros(2, 4), (4,), torch.ones(4, dtype=torch.float64))


@pytest.mark.parametrize("f", FUNCS)
def test_wrong_shape(f):
    x = torch.randn(2, 3, 4)
    with pytest.raises(ValueError, match=r"expects input of shape \[\*, 5\]"):
        f(x, (5,))
    with pytest.raises(ValueError, match="expects input"):
        f(x, (2, 3, 4, 1))
    with pytest.raises(ValueError, match="weight must have shape"):
        f(x, (4,), torch.ones(5))
    with pytest.raises(ValueError, match="weight must have shape"):
        f(x, (3, 4), torch.ones(12))
    with pytest.raises(ValueError, match="at least one"):
        f(x, ())
    with pytest.raises(ValueError, match="positive"):
        f(torch.zeros(2, 0), (0,))
    with pytest.raises(TypeError, match="normalized_shape"):
        f(x, (4.0,))
    with pytest.raises(TypeError, match="normalized_shape"):
        f(x, None)


@pytest.mark.parametrize("f", FUNCS)
def test_wrong_types(f):
    with pytest.raises(TypeError, match="torch.Tensor"):
        f([[1.0, 2.0]], (2,))
    with pytest.raises(TypeError, match="weight must be a torch.Tensor"):
        f(torch.zeros(1, 2), (2,), [1.0, 1.0])
    with pytest.raises(TypeError, match="dense"):
        f(torch.zeros(2, 2).to_sparse(), (2,))


def test_bad_scalars():
    x = torch.randn(2, 4)
    for eps in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="eps"):
            rt.rms_norm(x, (4,), eps=eps)
        with pytest.raises(ValueError, match="eps"):
            rt.layer_norm(x, (4,), eps=eps)
    with pytest.raises(TypeError, match="eps"):
        rt.rms_norm(x, (4,), eps="small")
    for p in (0.0, 1.01, -1.0):
        with pytest.raises(ValueError, match="partial"):
            rt.rms_norm(x, (4,), partial=p)
    with pytest.raises(ValueError, match="weight_offset"):
        rt.rms_norm(x, (4,), torch.ones(4), weight_offset=float("inf"))


def test_cuda_tensors_are_refused_until_cuda_lands():
    # Without a GPU, fake CUDA tensors exercise the same check that real ones would hit.
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.empty(2, 8, device="cuda")
        for call in (lambda: rt.rms_norm(x, (8,)), lambda: rt.layer_norm(x, (8,))):
            with pytest.raises(NotImplementedError, match="CPU only"):
                call()
    w = torch.ones(8)
    with FakeTensorMode(allow_non_fake_inputs=True):
        wc = torch.ones(8, device="cuda")
        with pytest.raises(NotImplementedError, match="weight is on cuda"):
            rt.rms_norm(torch.empty(2, 8), (8,), wc)
    del w
    if torch.cuda.is_available():
        with pytest.raises(NotImplementedError, match="CPU only"):
            rt.RMSNorm(8).cuda()(torch.randn(2, 8, device="cuda"))


def test_device_mismatch():
    x = torch.randn(2, 8)
    with pytest.raises(ValueError, match="meta"):
        rt.rms_norm(x, (8,), torch.ones(8, device="meta"))
