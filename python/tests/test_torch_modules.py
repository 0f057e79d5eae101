"""Module behaviour: constructor, state_dict both ways, dtype moves, replace_layernorm."""
import io

import pytest
import torch
from torch import nn

import rmsnorm.torch as rt


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def roundtrip(sd):
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def test_rmsnorm_is_a_torch_rmsnorm_with_the_same_state():
    ours = rt.RMSNorm([4, 8], eps=1e-5)
    theirs = nn.RMSNorm([4, 8], eps=1e-5)
    assert isinstance(ours, nn.RMSNorm)
    assert ours.normalized_shape == theirs.normalized_shape == (4, 8)
    assert ours.eps == theirs.eps and ours.elementwise_affine
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight"]
    assert [n for n, _ in ours.named_parameters()] == ["weight"]
    torch.testing.assert_close(ours.weight, theirs.weight)  # ones
    assert rt.RMSNorm(8, elementwise_affine=False).weight is None
    assert list(rt.RMSNorm(8, elementwise_affine=False).state_dict()) == []


def test_state_dict_loads_both_ways():
    theirs = nn.RMSNorm(16)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
    ours = rt.RMSNorm(16)
    ours.load_state_dict(roundtrip(theirs.state_dict()))
    torch.testing.assert_close(ours.weight, theirs.weight)
    x = torch.randn(3, 16)
    torch.testing.assert_close(ours(x), theirs(x))
    with torch.no_grad():
        ours.weight.mul_(2)
    back = nn.RMSNorm(16)
    back.load_state_dict(roundtrip(ours.state_dict()))
    torch.testing.assert_close(back(x), ours(x))
    # LayerNorm, in a model, both ways.
    model = nn.Sequential(nn.Linear(16, 16), nn.LayerNorm(16))
    with torch.no_grad():
        model[1].weight.uniform_(0.5, 1.5)
        model[1].bias.uniform_(-1, 1)
    ours_model = nn.Sequential(nn.Linear(16, 16), rt.LayerNorm(16))
    ours_model.load_state_dict(roundtrip(model.state_dict()))
    torch.testing.assert_close(ours_model(x), model(x))
    model.load_state_dict(roundtrip(ours_model.state_dict()))
    # A mismatch is torch's usual error, not something silent.
    with pytest.raises(RuntimeError):
        rt.RMSNorm(8).load_state_dict(nn.RMSNorm(16).state_dict())


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_works_after_to_dtype(dtype):
    ours = rt.RMSNorm(32).to(dtype)
    theirs = nn.RMSNorm(32).to(dtype)
    assert ours.weight.dtype == dtype
    x = torch.randn(4, 32, dtype=dtype, requires_grad=True)
    y = ours(x)
    assert y.dtype == dtype
    torch.testing.assert_close(y, theirs(x))
    y.float().pow(2).sum().backward()
    assert ours.weight.grad.dtype == dtype and x.grad.dtype == dtype
    ln = rt.LayerNorm(32).to(dtype)
    assert ln(x).dtype == dtype
    # And back: a checkpoint taken in bf16 loads into an f32 module.
    back = rt.RMSNorm(32)
    back.load_state_dict(ours.state_dict())
    assert back.weight.dtype == torch.float32


def test_constructor_options_and_repr():
    m = rt.RMSNorm(8, eps=1e-6, partial=0.25, weight_offset=1.0, bias=True, dtype=torch.bfloat16)
    assert m.partial == 0.25 and m.weight_offset == 1.0
    assert m.weight.dtype == torch.bfloat16 and m.bias.dtype == torch.bfloat16
    # The gain starts at 1 whatever the offset, as Gemma's (1 + w) with w = 0.
    torch.testing.assert_close(m.weight.float() + m.weight_offset, torch.ones(8))
    torch.testing.assert_close(m.bias.float(), torch.zeros(8))
    assert list(m.state_dict()) == ["weight", "bias"]
    r = repr(m)
    assert "partial=0.25" in r and "weight_offset=1.0" in r and "bias=True" in r
    m = m.float()
    with torch.no_grad():
        m.weight.uniform_(-0.5, 0.5)
        m.bias.uniform_(-0.5, 0.5)
    x = torch.randn(3, 8)
    ms = x[:, :2].pow(2).mean(-1, keepdim=True)  # k = ceil(0.25 * 8) = 2
    torch.testing.assert_close(m(x), x * torch.rsqrt(ms + 1e-6) * (1.0 + m.weight) + m.bias)
    m.reset_parameters()
    torch.testing.assert_close(m.weight.float(), torch.zeros(8))
    assert "partial" not in repr(rt.RMSNorm(8))


def test_module_constructor_rejects_bad_arguments():
    with pytest.raises(ValueError, match="partial"):
        rt.RMSNorm(8, partial=0.0)
    with pytest.raises(ValueError, match="eps"):
        rt.RMSNorm(8, eps=-1.0)
    with pytest.raises(ValueError, match="normalized_shape"):
        rt.RMSNorm(0)
    with pytest.raises(TypeError, match="normalized_shape"):
        rt.RMSNorm("8")
    with pytest.raises(TypeError, match="dtype"):
        rt.RMSNorm(8, dtype=torch.float64)
    with pytest.raises(TypeError, match="dtype"):
        rt.LayerNorm(8, dtype=torch.int32)
    with pytest.raises(ValueError, match="weight_offset"):
        rt.RMSNorm(8, weight_offset=float("nan"))


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm1 = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d, bias=False), nn.GELU())
        self.norm2 = nn.LayerNorm(d, elementwise_affine=False)

    def forward(self, x):
        return self.norm2(self.ff(self.norm1(x)))


class ChannelsFirstLayerNorm(nn.LayerNorm):
    def forward(self, x):  # normalizes dim 1: not a plain LayerNorm, must be left alone
        return super().forward(x.transpose(1, -1)).transpose(1, -1)


def manual_rms(x, weight, bias, eps):
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight
    return y if bias is None else y + bias


def test_replace_layernorm_swaps_and_keeps_the_gains():
    d = 16
    shared = nn.LayerNorm(d)
    model = nn.Sequential(Block(d), Block(d), shared, nn.Linear(d, d), shared, ChannelsFirstLayerNorm(4))
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.LayerNorm) and m.elementwise_affine:
                m.weight.uniform_(0.5, 1.5)
                if m.bias is not None:
                    m.bias.uniform_(-0.5, 0.5)
    model.eval()
    old = {name: m for name, m in model.named_modules() if isinstance(m, nn.LayerNorm)}
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    n_params = len(list(model.parameters()))

    assert rt.replace_layernorm(model, partial=0.5) is model

    new = dict(model.named_modules())
    for name, ln in old.items():
        m = new[name]
        if isinstance(ln, ChannelsFirstLayerNorm):
            assert m is ln
            continue
        assert type(m) is rt.RMSNorm, name
        assert m.partial == 0.5 and m.eps == ln.eps and m.normalized_shape == ln.normalized_shape
        assert m.training is False
        assert m.weight is ln.weight  # the same Parameter: gains and optimizer state carry over
        assert m.bias is ln.bias
    assert model[2] is model[4]  # shared stays shared
    assert len(list(model.parameters())) == n_params
    # What the swapped model computes: pRMSNorm with the LayerNorms' own gains and biases.
    norm = model[0].norm1
    x = torch.randn(3, d)
    k = 8  # ceil(0.5 * 16)
    ms = x[:, :k].pow(2).mean(-1, keepdim=True)
    torch.testing.assert_close(norm(x), x * torch.rsqrt(ms + norm.eps) * norm.weight + norm.bias)
    # The optimizer built before the swap still trains the swapped model's gains.
    before = model[0].norm1.weight.detach().clone()
    model[:5](torch.randn(4, d)).sum().backward()
    opt.step()
    assert not torch.equal(before, model[0].norm1.weight)


def test_replace_layernorm_full_rms_matches_manual_and_root():
    ln = nn.LayerNorm(12, eps=1e-5)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-1, 1)
    swapped = rt.replace_layernorm(ln)  # a root LayerNorm cannot be swapped in place: it is returned
    assert type(swapped) is rt.RMSNorm and swapped.weight is ln.weight
    x = torch.randn(5, 12)
    torch.testing.assert_close(swapped(x), manual_rms(x, ln.weight, ln.bias, 1e-5))
    # Our own LayerNorm is a LayerNorm too.
    model = nn.Sequential(rt.LayerNorm(12), nn.LayerNorm(12, elementwise_affine=False))
    rt.replace_layernorm(model)
    assert all(type(m) is rt.RMSNorm for m in model)
    assert model[1].weight is None
    torch.testing.assert_close(model(x), manual_rms(manual_rms(x, None, None, 1e-5), None, None, 1e-5))


def test_replace_layernorm_checks_arguments():
    with pytest.raises(TypeError):
        rt.replace_layernorm("model")
    with pytest.raises(ValueError, match="partial"):
        rt.replace_layernorm(nn.Sequential(nn.LayerNorm(4)), partial=2.0)
    model = nn.Sequential(nn.Linear(3, 3))
    assert rt.replace_layernorm(model) is model  # nothing to swap is fine
