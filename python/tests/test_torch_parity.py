"""rmsnorm.torch against torch's own norms and against float64 formulas, in values and gradients."""
import math
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import rmsnorm
import rmsnorm.torch as rt

# Parity with torch: same math in f32, so a few f32 ulps; bf16/f16 outputs may round one ulp apart.
TOL = {
    torch.float32: dict(rtol=1e-5, atol=1e-5),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
}


def grads(y, inputs, dy):
    return torch.autograd.grad(y, inputs, dy)


def assert_close(a, b, dtype, scale=1.0):
    t = TOL[dtype]
    torch.testing.assert_close(a.float(), b.float(), rtol=t["rtol"], atol=t["atol"] * scale)


pytestmark = pytest.mark.usefixtures("torch_seed")


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape, normalized", [((6, 64), (64,)), ((2, 3, 5, 40), (5, 40)), ((1, 4096), (4096,))])
@pytest.mark.parametrize("eps", [None, 1e-5])
def test_module_matches_torch_rmsnorm(route, dtype, shape, normalized, eps):
    ours = rt.RMSNorm(normalized, eps=eps).to(dtype)
    theirs = torch.nn.RMSNorm(normalized, eps=eps).to(dtype)
    with torch.no_grad():
        ours.weight.copy_(torch.rand(normalized) + 0.5)
        theirs.weight.copy_(ours.weight)
    x = (torch.randn(shape) * 2).to(dtype).requires_grad_()
    y, yt = ours(x), theirs(x)
    assert y.dtype == dtype and y.shape == x.shape
    assert_close(y, yt, dtype)
    dy = torch.randn(shape).to(dtype)
    dx, dw = grads(y, (x, ours.weight), dy)
    dxt, dwt = grads(yt, (x, theirs.weight), dy)
    assert dw.dtype == ours.weight.dtype
    assert_close(dx, dxt, dtype)
    rows = x.numel() // math.prod(normalized)
    assert_close(dw, dwt, dtype, scale=math.sqrt(rows))  # a sum over rows


def test_eps_none_is_float32_machine_epsilon():
    # torch uses finfo(float32).eps for float32/bf16/f16 inputs; a row of tiny values shows the eps used.
    assert rt.RMS_NORM_DEFAULT_EPS == torch.finfo(torch.float32).eps
    x = torch.full((1, 8), 1e-4)
    for dtype in (torch.float32, torch.bfloat16):
        xd = x.to(dtype)
        torch.testing.assert_close(rt.rms_norm(xd, (8,)).float(), F.rms_norm(xd, (8,)).float())
    expect = 1e-4 / math.sqrt(1e-8 + torch.finfo(torch.float32).eps)
    assert abs(rt.rms_norm(x, (8,))[0, 0].item() - expect) < 1e-6 * expect


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_functional_matches_f_rms_norm(route, dtype):
    x = torch.randn(3, 7, 96).to(dtype).requires_grad_()
    w = (torch.rand(96) + 0.5).to(dtype).requires_grad_()
    y, yt = rt.rms_norm(x, [96], w, 1e-6), F.rms_norm(x, [96], w, 1e-6)
    assert_close(y, yt, dtype)
    dy = torch.randn_like(y)
    for a, b in zip(grads(y, (x, w), dy), grads(yt, (x, w), dy)):
        assert_close(a, b, dtype, scale=5)
    # Without a weight, and with a plain int as normalized_shape.
    assert_close(rt.rms_norm(x, 96), F.rms_norm(x, [96]), dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("affine, bias", [(True, True), (True, False), (False, False)])
def test_layernorm_matches_torch(route, dtype, affine, bias):
    ours = rt.LayerNorm((4, 48), elementwise_affine=affine, bias=bias).to(dtype)
    theirs = torch.nn.LayerNorm((4, 48), elementwise_affine=affine, bias=bias).to(dtype)
    if affine:
        with torch.no_grad():
            ours.weight.copy_(torch.rand(4, 48) + 0.5)
            theirs.weight.copy_(ours.weight)
            if bias:
                ours.bias.copy_(torch.randn(4, 48))
                theirs.bias.copy_(ours.bias)
    x = (torch.randn(5, 4, 48) + 1.5).to(dtype).requires_grad_()
    y, yt = ours(x), theirs(x)
    assert_close(y, yt, dtype)
    dy = torch.randn_like(y)
    params = [x] + list(ours.parameters())
    params_t = [x] + list(theirs.parameters())
    for a, b in zip(grads(y, params, dy), grads(yt, params_t, dy)):
        assert a.dtype == b.dtype
        assert_close(a, b, dtype, scale=3)


def test_layer_norm_functional_matches_f_layer_norm(route):
    x = torch.randn(8, 33, requires_grad=True)
    w = torch.rand(33, requires_grad=True)
    b = torch.randn(33, requires_grad=True)
    y, yt = rt.layer_norm(x, (33,), w, b, 1e-3), F.layer_norm(x, (33,), w, b, 1e-3)
    torch.testing.assert_close(y, yt)
    dy = torch.randn_like(y)
    for a, c in zip(grads(y, (x, w, b), dy), grads(yt, (x, w, b), dy)):
        torch.testing.assert_close(a, c, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(rt.layer_norm(x, 33), F.layer_norm(x, (33,)))


def prms_formula(x, w, eps, partial, offset=0.0, b=None):
    n = x.shape[-1]
    k = math.ceil(partial * n)  # Python floats: the paper's k
    ms = x[..., :k].pow(2).mean(-1, keepdim=True)
    y = x / torch.sqrt(ms + eps) * (offset + w)
    return y if b is None else y + b


@pytest.mark.parametrize("partial, n", [(0.0625, 128), (0.125, 100), (0.3, 37), (0.5, 5)])
def test_prmsnorm_values_and_gradients_match_formula(route, partial, n):
    x = torch.randn(6, n, dtype=torch.float64)
    w = torch.rand(n, dtype=torch.float64) + 0.5
    xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
    ref = prms_formula(xr, wr, 1e-6, partial)
    xo, wo = x.float().requires_grad_(), w.float().requires_grad_()
    y = rt.rms_norm(xo, (n,), wo, 1e-6, partial=partial)
    torch.testing.assert_close(y.double(), ref, rtol=2e-6, atol=2e-6)
    dy = torch.randn(6, n, dtype=torch.float64)
    dx, dw = grads(y, (xo, wo), dy.float())
    dxr, dwr = grads(ref, (xr, wr), dy)
    torch.testing.assert_close(dx.double(), dxr, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dw.double(), dwr, rtol=1e-4, atol=1e-5)
    # The module does the same.
    m = rt.RMSNorm(n, eps=1e-6, partial=partial)
    with torch.no_grad():
        m.weight.copy_(w.float())
    torch.testing.assert_close(m(x.float()), y.detach())


def test_weight_offset_and_bias_gradients_match_formula(route):
    n = 24
    x = torch.randn(5, n, dtype=torch.float64)
    w = torch.randn(n, dtype=torch.float64) * 0.1
    b = torch.randn(n, dtype=torch.float64)
    xr, wr, br = (t.clone().requires_grad_() for t in (x, w, b))
    ref = prms_formula(xr, wr, 1e-5, 1.0, offset=1.0, b=br)
    xo, wo, bo = (t.float().requires_grad_() for t in (x, w, b))
    y = rt.rms_norm(xo, (n,), wo, 1e-5, weight_offset=1.0, bias=bo)
    torch.testing.assert_close(y.double(), ref, rtol=2e-6, atol=2e-6)
    dy = torch.randn(5, n, dtype=torch.float64)
    for a, r in zip(grads(y, (xo, wo, bo), dy.float()), grads(ref, (xr, wr, br), dy)):
        torch.testing.assert_close(a.double(), r, rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:Mismatch dtype between input and weight")
def test_mixed_dtypes_follow_input_and_weight(route):
    x = torch.randn(4, 32, dtype=torch.bfloat16, requires_grad=True)
    w = (torch.rand(32) + 0.5).requires_grad_()  # f32 gain on bf16 activations
    y = rt.rms_norm(x, (32,), w)
    assert y.dtype == torch.bfloat16
    assert_close(y, F.rms_norm(x, (32,), w), torch.bfloat16)
    y.sum().backward()
    assert x.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.float32
    # f32 activations with a bf16 gain: output f32, gain gradient bf16.
    x32 = torch.randn(4, 32, requires_grad=True)
    wb = (torch.rand(32) + 0.5).bfloat16().requires_grad_()
    y = rt.rms_norm(x32, (32,), wb)
    assert y.dtype == torch.float32
    torch.testing.assert_close(y, F.rms_norm(x32, (32,), wb.float()))
    y.sum().backward()
    assert wb.grad.dtype == torch.bfloat16


def test_non_contiguous_inputs_and_gradients(route):
    base = torch.randn(16, 64)
    xs = base[:, ::2]  # strided view of the same values
    assert not xs.is_contiguous()
    torch.testing.assert_close(rt.rms_norm(xs, (32,)), F.rms_norm(xs, (32,)))
    xs = xs.detach().requires_grad_()
    # An expanded (stride 0) gradient, as sum() produces.
    rt.rms_norm(xs, (32,)).sum().backward()
    xc = xs.detach().clone().requires_grad_()
    F.rms_norm(xc, (32,)).sum().backward()
    torch.testing.assert_close(xs.grad, xc.grad, rtol=1e-5, atol=1e-6)


def test_zero_rows_and_requires_grad_subsets(route):
    m = rt.RMSNorm(8)
    x = torch.randn(0, 8, requires_grad=True)
    y = m(x)
    assert y.shape == (0, 8)
    y.sum().backward()
    assert x.grad.shape == (0, 8)
    torch.testing.assert_close(m.weight.grad, torch.zeros(8))  # a sum over no rows
    # Only the weight needs a gradient; only the input needs one.
    x = torch.randn(3, 8)
    m(x).sum().backward()
    w_only = m.weight.grad.clone()
    m.weight.grad = None
    m.weight.requires_grad_(False)
    xg = x.clone().requires_grad_()
    m(xg).sum().backward()
    assert m.weight.grad is None and xg.grad is not None
    ref = torch.nn.RMSNorm(8)
    ref(x).sum().backward()
    torch.testing.assert_close(w_only, ref.weight.grad)


def test_routes_agree_bit_for_bit(monkeypatch):
    x = torch.randn(7, 5, 96)
    w = torch.rand(96) + 0.5
    b = torch.randn(96)
    dy = torch.randn(7, 5, 96)

    def run():
        xg, wg, bg = (t.clone().requires_grad_() for t in (x, w, b))
        with torch.no_grad():
            inference = (rt.rms_norm(x, (96,), w, partial=0.5, bias=b), rt.layer_norm(x, (96,), w, b))
        y = rt.rms_norm(xg, (96,), wg, partial=0.5, bias=bg)
        z = rt.layer_norm(xg, (96,), wg, bg)
        assert y.requires_grad and not inference[0].requires_grad
        return inference + (y.detach(), z.detach()) + grads(y, (xg, wg, bg), dy) + grads(z, (xg, wg, bg), dy)

    eager = run()
    monkeypatch.setattr(rt.functional, "_FAST_PATH", False)
    ops = run()
    for a, b_ in zip(eager, ops):
        assert torch.equal(a, b_)
    assert torch.equal(eager[0], eager[2]) and torch.equal(eager[1], eager[3])
    with torch.inference_mode():
        assert torch.equal(rt.rms_norm(x, (96,), w, partial=0.5, bias=b), eager[0])


def test_autograd_graph_shows_the_route(monkeypatch):
    x = torch.randn(3, 8, requires_grad=True)
    if rt.functional._NATIVE is not None:
        assert "RmsNormFunction" in rt.rms_norm(x, (8,)).grad_fn.name()  # torch::autograd::CppNode<...>
        assert "LayerNormFunction" in rt.layer_norm(x, (8,)).grad_fn.name()
    monkeypatch.setattr(rt.functional, "_NATIVE", None)
    assert rt.rms_norm(x, (8,)).grad_fn.name() == "EagerRmsNormBackward"
    assert rt.layer_norm(x, (8,)).grad_fn.name() == "EagerLayerNormBackward"
    monkeypatch.setattr(rt.functional, "_FAST_PATH", False)
    view = rt.rms_norm(x, (8,)).grad_fn  # the op works on (rows, cols); a view restores the shape
    assert "rmsnorm_rms_norm_fwd" in view.next_functions[0][0].name()


def test_double_backward_is_refused_clearly(route):
    x = torch.randn(3, 8, requires_grad=True)
    (g,) = torch.autograd.grad(rt.rms_norm(x, (8,)).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_dispatch_modes_still_see_the_op():
    # The eager fast path must not hide the op from a TorchDispatchMode (profilers, tracers...).
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Log():
        rt.rms_norm(torch.randn(2, 8), (8,))
        rt.layer_norm(torch.randn(2, 8), (8,))
    assert any("rmsnorm.rms_norm_fwd" in s for s in seen), seen
    assert any("rmsnorm.layer_norm_fwd" in s for s in seen), seen


@pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning", "ignore:There is a performance drop", "ignore:.*jit.trace. is deprecated")
def test_transforms_and_tracers_see_the_op():
    x = torch.randn(4, 8)
    w = torch.rand(8) + 0.5
    # functorch: vmap over a batch dimension gives what a loop gives.
    per_row = torch.vmap(lambda r: rt.rms_norm(r, (8,), w))(x)
    torch.testing.assert_close(per_row, rt.rms_norm(x, (8,), w))
    # jit.trace records dispatcher ops only; the traced graph must contain ours.
    with torch.no_grad():
        traced = torch.jit.trace(lambda t: rt.rms_norm(t, (8,), w), (x,), check_trace=False)
    assert "rmsnorm::rms_norm_fwd" in str(traced.graph)
    torch.testing.assert_close(traced(x * 2), rt.rms_norm(x * 2, (8,), w))


def test_meta_tensors_give_shapes():
    m = rt.RMSNorm((3, 16), device="meta")
    y = m(torch.empty(2, 3, 16, device="meta", dtype=torch.float32))
    assert y.device.type == "meta" and y.shape == (2, 3, 16)
    y = rt.layer_norm(torch.empty(4, 16, device="meta", dtype=torch.bfloat16), (16,))
    assert y.dtype == torch.bfloat16 and y.shape == (4, 16)


def test_threads_do_not_change_gradients():
    x = torch.randn(256, 512, requires_grad=True)
    w = (torch.rand(512) + 0.5).requires_grad_()
    dy = torch.randn(256, 512)
    out = []
    for threads in (1, 2):
        rmsnorm.set_num_threads(threads)
        out.append(grads(rt.rms_norm(x, (512,), w), (x, w), dy))
    assert torch.equal(out[0][0], out[1][0]) and torch.equal(out[0][1], out[1][1])


@pytest.mark.parametrize("op, args", [
    ("rms_norm_fwd", lambda: (torch.randn(3, 8, requires_grad=True), torch.rand(8, requires_grad=True),
                              torch.randn(8, requires_grad=True), 1e-6, 0.5, 1.0)),
    ("rms_norm_bwd", lambda: (torch.randn(3, 8), torch.randn(3, 8), torch.rand(8), torch.rand(3), 1e-6, 1.0, 0.0,
                              True, False)),
    ("layer_norm_fwd", lambda: (torch.randn(3, 8, dtype=torch.bfloat16, requires_grad=True),
                                torch.rand(8, requires_grad=True), None, 1e-5)),
    ("layer_norm_bwd", lambda: (torch.randn(3, 8), torch.randn(3, 8), None, torch.randn(3), torch.rand(3), 1e-5,
                                False, False)),
    # (*, cols) with the leading dimensions kept, and statistics of shape (*).
    ("rms_norm_fwd", lambda: (torch.randn(2, 3, 8, requires_grad=True), torch.rand(8, requires_grad=True), None,
                              1e-6, 1.0, 0.0)),
    ("rms_norm_bwd", lambda: (torch.randn(2, 3, 8), torch.randn(2, 3, 8), torch.rand(8), torch.rand(2, 3), 1e-6, 1.0,
                              0.0, True, True)),
    ("layer_norm_fwd", lambda: (torch.randn(2, 3, 8, requires_grad=True), torch.rand(8, requires_grad=True),
                                torch.randn(8, requires_grad=True), 1e-5)),
    ("layer_norm_bwd", lambda: (torch.randn(2, 3, 8), torch.randn(2, 3, 8), torch.rand(8), torch.randn(2, 3),
                                torch.rand(2, 3), 1e-5, True, False)),
    ("add_rms_norm_fwd", lambda: (torch.randn(2, 3, 8, requires_grad=True), torch.randn(2, 3, 8, requires_grad=True),
                                  torch.rand(8, requires_grad=True), None, 1e-6, 1.0, 0.0)),
])
def test_opcheck(op, args):
    # Schema, fake implementation, autograd registration and AOT dispatch, as torch checks custom ops.
    torch.library.opcheck(getattr(torch.ops.rmsnorm, op).default, args())


def test_native_ops_are_built_where_expected():
    # make test builds the wheel in the venv that has torch, so the C++ autograd ops must be there.
    if os.environ.get("RMSNORM_EXPECT_TORCH_OPS") != "1":
        pytest.skip("RMSNORM_EXPECT_TORCH_OPS=1 is set by make test-python")
    assert rt.functional._NATIVE is not None


def test_without_the_native_library_the_python_route_runs():
    # RMSNORM_TORCH_OPS=0 (as a torch of another version does) must leave rmsnorm.torch importable, with
    # no entry points and training through the Python autograd Function. In a fresh process: the switch
    # is read at import.
    script = (
        "import torch, rmsnorm.torch as rt\n"
        "assert rt.functional._NATIVE is None\n"
        "x = torch.randn(3, 8, requires_grad=True)\n"
        "y = rt.rms_norm(x, (8,))\n"
        "assert y.grad_fn.name() == 'EagerRmsNormBackward', y.grad_fn.name()\n"
        "y.sum().backward()\n"
        "assert x.grad is not None\n"
    )
    env = dict(os.environ, RMSNORM_TORCH_OPS="0")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("norm", ["rms_norm", "layer_norm"])
def test_native_entry_matches_the_python_route_and_leaves_strided_rows_to_it(norm, monkeypatch):
    # The C++ entry points (rmsnorm._torch_ops) take the eager calls, with and without autograd, and
    # return None for a non-contiguous x, which the Python route then reads in place. 300 x 256 is above
    # the size at which the entry lets other threads run during the kernel.
    if rt.functional._NATIVE is None:
        pytest.skip("the wheel has no C++ entry points for this torch")
    g = torch.Generator().manual_seed(9)
    x0, w = torch.randn(300, 256, generator=g), torch.rand(256, generator=g) + 0.5
    call = getattr(rt, norm)
    for grad in (False, True):
        x = x0.clone().requires_grad_(grad)
        got = call(x, (256,), w)
        assert (got.grad_fn is not None) == grad
        with monkeypatch.context() as m:
            m.setattr(rt.functional, "_NATIVE", None)
            want = call(x, (256,), w)
        assert torch.equal(got, want)
    strided = torch.randn(256, 300, generator=g).t()
    entry = getattr(rt.functional._NATIVE, norm)
    args = (1e-6, 1.0, 0.0) if norm == "rms_norm" else (1e-5,)
    assert entry(strided, w, None, *args, False) is None
    assert torch.equal(call(strided, (256,), w), call(strided.contiguous(), (256,), w))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_native_entry_adds_and_normalizes_as_the_python_route(dtype, monkeypatch):
    # The fused add's inference entry point: the same (y, h) as the Python route's kernel call, bit for
    # bit, and None (the Python route then) when the residual is strided.
    if rt.functional._NATIVE is None:
        pytest.skip("the wheel has no C++ entry points for this torch")
    g = torch.Generator().manual_seed(11)
    x, residual = (torch.randn(300, 256, generator=g).to(dtype) for _ in range(2))
    w, b = torch.rand(256, generator=g) + 0.5, torch.randn(256, generator=g)
    with torch.no_grad():
        got = rt.add_rms_norm(x, residual, w, 1e-6, partial=0.5, weight_offset=0.25, bias=b)
        with monkeypatch.context() as m:
            m.setattr(rt.functional, "_NATIVE", None)
            want = rt.add_rms_norm(x, residual, w, 1e-6, partial=0.5, weight_offset=0.25, bias=b)
    assert isinstance(got, tuple) and len(got) == 2
    for a, e in zip(got, want):
        assert a.dtype == dtype and torch.equal(a, e)
    strided = torch.randn(256, 300, generator=g).to(dtype).t()
    assert rt.functional._NATIVE.add_rms_norm(x, strided, w, None, 1e-6, 1.0, 0.0) is None
    with torch.no_grad():
        for a, e in zip(rt.add_rms_norm(x, strided, w, 1e-6), rt.add_rms_norm(x, strided.contiguous(), w, 1e-6)):
            assert torch.equal(a, e)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("params", ["none", "weight", "bias", "both", "bf16 weight, frozen"])
def test_native_autograd_matches_the_python_function(dtype, params, monkeypatch):
    # The C++ autograd ops and the Python Functions call the same kernels: same y and gradients, bit for
    # bit, each gradient in its tensor's dtype and only where asked for.
    if rt.functional._NATIVE is None:
        pytest.skip("the wheel has no C++ autograd ops for this torch")
    g = torch.Generator().manual_seed(5)
    x0 = torch.randn(2, 3, 40, generator=g).to(dtype)
    w0 = torch.rand(40, generator=g) + 0.5
    b0 = torch.randn(40, generator=g)
    dy = torch.randn(2, 3, 40, generator=g).to(dtype)

    def run(norm):
        x = x0.clone().requires_grad_()
        w = None if params in ("none", "bias") else w0.clone().requires_grad_()
        if params == "bf16 weight, frozen":
            w = w0.to(torch.bfloat16)
        b = b0.clone().requires_grad_() if params in ("bias", "both") else None
        if norm == "rms_norm":
            y = rt.rms_norm(x, (40,), w, 1e-6, partial=0.25, weight_offset=0.5, bias=b)
        else:
            y = rt.layer_norm(x, (40,), w, b, 1e-5)
        y.backward(dy)
        return [y, x.grad] + [None if p is None else p.grad for p in (w, b)]

    for norm in ("rms_norm", "layer_norm"):
        native = run(norm)
        with monkeypatch.context() as m:
            m.setattr(rt.functional, "_NATIVE", None)
            python = run(norm)
        for a, e in zip(native, python):
            assert (a is None) == (e is None), norm
            if e is not None:
                assert a.dtype == e.dtype and torch.equal(a, e), norm
