"""The fused residual add (add_rms_norm, FusedAddRMSNorm, fused_add_rms_norm_) against float64 formulas:
values, gradients through both outputs (also by finite differences), in-place semantics, errors, compile."""
import pytest
import torch
from torch import nn

import rmsnorm.torch as rt

# y from our kernels against the float64 formula on the same h: f32 arithmetic, then the dtype's rounding.
TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
}
DTYPES = list(TOL)


pytestmark = pytest.mark.usefixtures("torch_seed")


def reference(x, residual, weight, eps, bias=None, partial=1.0, weight_offset=0.0):
    """(y, h) in float64 from float64 inputs: h = x + residual, y = RMSNorm(h) over the last dimension."""
    h = x + residual
    n = h.shape[-1]
    k = rt.functional.math.ceil(partial * n) if partial < 1 else n
    rstd = torch.rsqrt(h[..., :k].pow(2).mean(-1, keepdim=True) + eps)
    y = h * rstd
    if weight is not None:
        y = y * (weight_offset + weight)
    if bias is not None:
        y = y + bias
    return y, h


def make(shape, dtype, requires_grad=False):
    x = (torch.randn(shape) * 2).to(dtype).requires_grad_(requires_grad)
    r = torch.randn(shape).to(dtype).requires_grad_(requires_grad)
    w = (torch.rand(shape[-1]) + 0.5).to(dtype).requires_grad_(requires_grad)
    return x, r, w


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(5, 64), (2, 3, 40), (1, 4096), (0, 16)])
def test_values_against_float64(route, dtype, shape):
    x, r, w = make(shape, dtype)
    y, h = rt.add_rms_norm(x, r, w, 1e-5)
    assert y.dtype == h.dtype == dtype and y.shape == h.shape == x.shape
    # h is the sum rounded to the dtype once, which is what torch's own add gives.
    assert torch.equal(h, x + r)
    # The reference starts from h as rounded, as the kernel does.
    y64 = reference(h.double(), torch.zeros_like(h, dtype=torch.float64), w.double(), 1e-5)[0]
    torch.testing.assert_close(y.double(), y64, **TOL[dtype])
    # And y is exactly what rms_norm gives on h.
    assert torch.equal(y, rt.rms_norm(h, (shape[-1],), w, 1e-5))


def test_partial_offset_bias_no_weight(route):
    x, r, w = make((4, 48), torch.float32)
    b = torch.randn(48)
    y, h = rt.add_rms_norm(x, r, w, 1e-6, partial=0.25, weight_offset=1.0, bias=b)
    y64, _ = reference(x.double(), r.double(), w.double(), 1e-6, b.double(), 0.25, 1.0)
    torch.testing.assert_close(y.double(), y64, rtol=1e-5, atol=1e-5)
    y, _ = rt.add_rms_norm(x, r)  # no weight: normalized over the last dimension, default eps
    torch.testing.assert_close(y.double(), reference(x.double(), r.double(), None, rt.RMS_NORM_DEFAULT_EPS)[0],
                               rtol=1e-5, atol=1e-5)
    # normalized_shape over two dimensions
    x3, r3 = torch.randn(3, 4, 8), torch.randn(3, 4, 8)
    w3 = torch.rand(4, 8) + 0.5
    y3, h3 = rt.add_rms_norm(x3, r3, w3, 1e-5)
    torch.testing.assert_close(y3, rt.rms_norm(h3, (4, 8), w3, 1e-5), rtol=0, atol=0)


def loss_weights(shape, dtype):
    return torch.randn(shape).to(dtype), torch.randn(shape).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradients_through_both_outputs(route, dtype):
    shape = (6, 40)
    x, r, w = make(shape, dtype, requires_grad=True)
    b = torch.randn(40).to(dtype).requires_grad_()
    dy, dh = loss_weights(shape, dtype)
    y, h = rt.add_rms_norm(x, r, w, 1e-5, bias=b)
    gx, gr, gw, gb = torch.autograd.grad((y, h), (x, r, w, b), (dy, dh))
    assert gx.dtype == gr.dtype == dtype and gw.dtype == w.dtype
    xd, rd, wd, bd = (t.detach().double().requires_grad_() for t in (x, r, w, b))
    yd, hd = reference(xd, rd, wd, 1e-5, bd)
    ex, er, ew, eb = torch.autograd.grad((yd, hd), (xd, rd, wd, bd), (dy.double(), dh.double()))
    tol = TOL[dtype]
    torch.testing.assert_close(gx.double(), ex, rtol=tol["rtol"] * 4, atol=tol["atol"] * 4)
    torch.testing.assert_close(gr.double(), er, rtol=tol["rtol"] * 4, atol=tol["atol"] * 4)
    torch.testing.assert_close(gw.double(), ew, rtol=tol["rtol"] * 4, atol=tol["atol"] * 8)
    torch.testing.assert_close(gb.double(), eb, rtol=tol["rtol"] * 4, atol=tol["atol"] * 8)
    # The two input gradients are equal but distinct tensors: accumulating into one leaves the other.
    assert torch.equal(gx, gr) and gx.data_ptr() != gr.data_ptr()


def test_gradient_by_finite_differences(route):
    """Our f32 gradient against central differences of the float64 function, along random directions."""
    shape = (3, 24)
    x, r, w = make(shape, torch.float32, requires_grad=True)
    dy, dh = loss_weights(shape, torch.float32)
    y, h = rt.add_rms_norm(x, r, w, 1e-5)
    gx, gr, gw = torch.autograd.grad((y, h), (x, r, w), (dy, dh))

    def loss(xv, rv, wv):
        yv, hv = reference(xv, rv, wv, 1e-5)
        return float((yv * dy.double()).sum() + (hv * dh.double()).sum())

    base = [t.detach().double() for t in (x, r, w)]
    step = 1e-6
    g = torch.Generator().manual_seed(3)
    for which, grad in enumerate((gx, gr, gw)):
        for _ in range(3):
            v = torch.randn(base[which].shape, generator=g, dtype=torch.float64)
            plus = [t.clone() for t in base]
            minus = [t.clone() for t in base]
            plus[which] += step * v
            minus[which] -= step * v
            fd = (loss(*plus) - loss(*minus)) / (2 * step)
            analytic = float((grad.double() * v).sum())
            assert abs(fd - analytic) <= 1e-4 * max(1.0, abs(fd)), (which, fd, analytic)


def test_gradient_when_h_is_unused(route):
    x, r, w = make((4, 32), torch.float32, requires_grad=True)
    y, _ = rt.add_rms_norm(x, r, w, 1e-5)
    gx, gr = torch.autograd.grad(y.sum(), (x, r))
    xd, rd = x.detach().double().requires_grad_(), r.detach().double().requires_grad_()
    ex, _ = torch.autograd.grad(reference(xd, rd, w.detach().double(), 1e-5)[0].sum(), (xd, rd))
    torch.testing.assert_close(gx.double(), ex, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(gr, gx, rtol=0, atol=0)


def test_only_residual_requires_grad(route):
    x, r, w = make((4, 32), torch.float32)
    r.requires_grad_()
    y, h = rt.add_rms_norm(x, r, w, 1e-5)
    (gr,) = torch.autograd.grad((y.sum() + h.sum()), (r,))
    assert gr.shape == r.shape and torch.isfinite(gr).all()


def test_two_backwards_accumulate_separately(route):
    x, r, w = make((4, 16), torch.float32, requires_grad=True)
    for _ in range(2):
        y, h = rt.add_rms_norm(x, r, w, 1e-5)
        (y.sum() + 2 * h.sum()).backward()
    torch.testing.assert_close(x.grad, r.grad, rtol=0, atol=0)
    # x.grad is twice one step's gradient, not four times (one tensor shared by x and r would be).
    y, h = rt.add_rms_norm(x, r, w, 1e-5)
    (one,) = torch.autograd.grad(y.sum() + 2 * h.sum(), (x,))
    torch.testing.assert_close(x.grad, 2 * one)


@pytest.mark.parametrize("dtype", DTYPES)
def test_inplace_has_vllm_semantics(route, dtype):
    x, r, w = make((7, 64), dtype)
    x0, r0 = x.clone(), r.clone()
    with torch.no_grad():
        out = rt.fused_add_rms_norm_(x, r, w, 1e-6)
    assert out[0] is x and out[1] is r
    y_expect, h_expect = rt.add_rms_norm(x0, r0, w, 1e-6)
    assert torch.equal(r, h_expect)  # residual <- x + residual
    assert torch.equal(x, y_expect)  # x <- norm(x + residual)


def test_inplace_refuses_bad_arguments():
    x, r, w = make((4, 32), torch.float32)
    with pytest.raises(ValueError, match="contiguous"):
        rt.fused_add_rms_norm_(x.t().contiguous().t(), r, w, 1e-6)
    with pytest.raises(ValueError, match="share memory"):
        rt.fused_add_rms_norm_(x, x, w, 1e-6)
    big = torch.randn(8, 32)
    with pytest.raises(ValueError, match="share memory"):
        rt.fused_add_rms_norm_(big[:4], big[2:6], w, 1e-6)
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        rt.fused_add_rms_norm_(x, r, w.requires_grad_(), 1e-6)
    w.requires_grad_(False)
    with pytest.raises(TypeError, match="dtype"):
        rt.fused_add_rms_norm_(x, r.double(), w, 1e-6)
    # Nothing was written by any of the refused calls.
    x0, r0 = x.clone(), r.clone()
    with pytest.raises(ValueError):
        rt.fused_add_rms_norm_(x, r, w, -1.0)
    assert torch.equal(x, x0) and torch.equal(r, r0)


def test_functional_refuses_bad_arguments():
    x, r, w = make((4, 32), torch.float32)
    with pytest.raises(TypeError, match="residual must be a torch.Tensor"):
        rt.add_rms_norm(x, 1.0, w)
    with pytest.raises(ValueError, match="residual must have the input's shape"):
        rt.add_rms_norm(x, r[:2], w)
    with pytest.raises(TypeError, match="one dtype"):
        rt.add_rms_norm(x, r.to(torch.bfloat16), w)
    with pytest.raises(ValueError, match="weight must have shape"):
        rt.add_rms_norm(x, r, w[:8], normalized_shape=(32,))
    with pytest.raises(ValueError, match="normalized_shape"):
        rt.add_rms_norm(x, r, w[:8])  # the weight's shape sets normalized_shape, which x's does not end with
    with pytest.raises(ValueError, match="eps"):
        rt.add_rms_norm(x, r, w, float("nan"))
    with pytest.raises(TypeError, match="dense"):
        rt.add_rms_norm(x, r.to_sparse(), w)


def test_module_is_rmsnorm_with_a_residual(route):
    fused = rt.FusedAddRMSNorm(32, eps=1e-6)
    plain = nn.RMSNorm(32, eps=1e-6)
    assert isinstance(fused, nn.RMSNorm)
    assert list(fused.state_dict()) == list(plain.state_dict())
    with torch.no_grad():
        fused.weight.copy_(torch.rand(32) + 0.5)
    x, r = torch.randn(3, 5, 32), torch.randn(3, 5, 32)
    y, h = fused(x, r)
    torch.testing.assert_close(h, x + r, rtol=0, atol=0)
    torch.testing.assert_close(y, rt.rms_norm(x + r, (32,), fused.weight, 1e-6), rtol=0, atol=0)
    assert torch.equal(fused(x), rt.rms_norm(x, (32,), fused.weight, 1e-6))
    xi, ri = x.clone(), r.clone()
    with torch.no_grad():
        fused.forward_inplace(xi, ri)
    assert torch.equal(xi, y.detach()) and torch.equal(ri, h.detach())


@pytest.fixture
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


class Block(nn.Module):
    """A pre-norm residual block with the add fused into the second norm."""

    def __init__(self, d=32):
        super().__init__()
        self.norm1 = rt.RMSNorm(d)
        self.lin1 = nn.Linear(d, d)
        self.norm2 = rt.FusedAddRMSNorm(d, partial=0.5)
        self.lin2 = nn.Linear(d, d)

    def forward(self, h):
        y, h = self.norm2(self.lin1(self.norm1(h)), h)
        return h + self.lin2(y)


def step(model, x):
    model.zero_grad(set_to_none=True)
    out = model(x)
    out.pow(2).sum().backward()
    return out.detach(), [p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_compile_fullgraph_training(_fresh_dynamo, backend):
    model = Block()
    x = torch.randn(6, 32)
    out_eager, g_eager = step(model, x)
    compiled = torch.compile(model, fullgraph=True, backend=backend)
    out_comp, g_comp = step(compiled, x)
    torch.testing.assert_close(out_comp, out_eager, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_comp, g_eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    explanation = torch._dynamo.explain(model)(x)
    assert explanation.graph_break_count == 0
    assert "rmsnorm.add_rms_norm_fwd" in "\n".join(g.code for g in explanation.graphs)


def test_compile_fullgraph_inplace(_fresh_dynamo):
    w = torch.rand(32) + 0.5

    def f(x, r):
        rt.fused_add_rms_norm_(x, r, w, 1e-6)
        return x * 2, r

    x, r = torch.randn(5, 32), torch.randn(5, 32)
    x_eager, r_eager = x.clone(), r.clone()
    with torch.no_grad():
        expect = f(x_eager, r_eager)
        got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, r)
    torch.testing.assert_close(got[0], expect[0], rtol=0, atol=0)
    torch.testing.assert_close(got[1], expect[1], rtol=0, atol=0)
    # The mutation reached the caller's tensors under compile too.
    assert torch.equal(x, x_eager) and torch.equal(r, r_eager)


def test_meta_tensors_give_shapes():
    x = torch.empty(3, 4, 16, device="meta")
    y, h = rt.add_rms_norm(x, torch.empty_like(x), torch.empty(16, device="meta"))
    assert y.shape == h.shape == x.shape and y.device.type == "meta"


def test_double_backward_is_refused(route):
    x, r, w = make((3, 8), torch.float32, requires_grad=True)
    y, h = rt.add_rms_norm(x, r, w, 1e-5)
    (g,) = torch.autograd.grad(y.pow(2).sum() + h.sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()
