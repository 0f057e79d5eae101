"""out= on the functional forms, and the kernels following torch's intra-op thread count."""
import pytest
import torch

import rmsnorm
import rmsnorm.torch as rt


pytestmark = pytest.mark.usefixtures("torch_seed")


def rms_reference(x, w, eps):
    x = x.double()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.double()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_out_writes_and_returns_out(route, dtype):
    x = torch.randn(3, 5, 64).to(dtype)
    w = (torch.rand(64) + 0.5).to(dtype)
    out = torch.full_like(x, float("nan"))
    got = rt.rms_norm(x, (64,), w, 1e-5, out=out)
    assert got is out
    assert torch.equal(out, rt.rms_norm(x, (64,), w, 1e-5))
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)
    torch.testing.assert_close(out.double(), rms_reference(x, w, 1e-5), **tol)


def test_out_may_be_the_input(route):
    x = torch.randn(4, 32)
    w = torch.rand(32) + 0.5
    expect = rt.rms_norm(x, (32,), w, 1e-5)
    rt.rms_norm(x, (32,), w, 1e-5, out=x)
    assert torch.equal(x, expect)


def test_layer_norm_out(route):
    x = torch.randn(6, 48)
    w, b = torch.rand(48) + 0.5, torch.randn(48)
    out = torch.empty_like(x)
    assert rt.layer_norm(x, (48,), w, b, 1e-5, out=out) is out
    torch.testing.assert_close(out, torch.nn.functional.layer_norm(x, (48,), w, b, 1e-5), rtol=1e-5, atol=1e-5)


def test_non_contiguous_input_into_out(route):
    x = torch.randn(32, 8).t()  # (8, 32), not contiguous
    w = torch.rand(32) + 0.5
    out = torch.empty(8, 32)
    rt.rms_norm(x, (32,), w, 1e-5, out=out)
    assert torch.equal(out, rt.rms_norm(x.contiguous(), (32,), w, 1e-5))


def test_out_errors_write_nothing(route):
    x = torch.randn(4, 32)
    w = torch.rand(32) + 0.5
    cases = [
        (torch.empty(4, 32, dtype=torch.float64), TypeError, "dtype"),
        (torch.empty(4, 31), ValueError, "shape"),
        (torch.empty(32, 4).t(), ValueError, "contiguous"),
        ([0.0] * 4, TypeError, "out must be a torch.Tensor"),
    ]
    for out, error, match in cases:
        with pytest.raises(error, match=match):
            rt.rms_norm(x, (32,), w, 1e-5, out=out)
        with pytest.raises(error, match=match):
            rt.layer_norm(x, (32,), w, None, 1e-5, out=out)
    # Overlapping x without being x: refused by the library, and out is left as it was.
    buf = torch.randn(5, 32)
    before = buf.clone()
    with pytest.raises(ValueError):
        rt.rms_norm(buf[:4], (32,), w, 1e-5, out=buf[1:])
    assert torch.equal(buf, before)


def test_out_refuses_autograd(route):
    x = torch.randn(4, 32, requires_grad=True)
    w = torch.rand(32) + 0.5
    out = torch.empty(4, 32)
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        rt.rms_norm(x, (32,), w, 1e-5, out=out)
    with pytest.raises(RuntimeError, match="automatic differentiation"):
        rt.layer_norm(x, (32,), w, None, 1e-5, out=out)
    with torch.no_grad():
        rt.rms_norm(x, (32,), w, 1e-5, out=out)
    assert not out.requires_grad


def test_out_under_compile():
    torch._dynamo.reset()
    w = torch.rand(32) + 0.5

    def f(x, out):
        rt.rms_norm(x, (32,), w, 1e-5, out=out)
        return out + 1

    x = torch.randn(5, 32)
    out = torch.empty(5, 32)
    with torch.no_grad():
        got = torch.compile(f, fullgraph=True, backend="aot_eager")(x, out)
    expect = rt.rms_norm(x, (32,), w, 1e-5)
    assert torch.equal(out, expect) and torch.equal(got, expect + 1)
    torch._dynamo.reset()


@pytest.fixture
def _restore_torch_threads():
    n = torch.get_num_threads()
    yield
    torch.set_num_threads(n)


@pytest.mark.parametrize("call", ["rms_fwd", "rms_train", "layer_fwd", "add", "ops"])
def test_kernels_follow_torch_threads(_restore_torch_threads, monkeypatch, call):
    if call == "ops":
        monkeypatch.setattr(rt.functional, "_FAST_PATH", False)
    x = torch.randn(4, 64, requires_grad=call == "rms_train")
    w = torch.rand(64) + 0.5

    def run():
        if call == "layer_fwd":
            rt.layer_norm(x, (64,), w)
        elif call == "add":
            rt.add_rms_norm(x, x, w)
        else:
            y = rt.rms_norm(x, (64,), w)
            if x.requires_grad:
                y.sum().backward()

    for n in (1, 3, 2):
        torch.set_num_threads(n)
        run()
        assert rmsnorm.get_num_threads() == n


def test_explicit_setting_holds_until_the_next_torch_call(_restore_torch_threads):
    torch.set_num_threads(2)
    x, w = torch.randn(4, 64), torch.rand(64)
    rt.rms_norm(x, (64,), w)
    rmsnorm.set_num_threads(5)
    assert rmsnorm.get_num_threads() == 5
    rmsnorm.rms_norm(x.numpy(), w.numpy())  # NumPy calls keep the explicit setting
    assert rmsnorm.get_num_threads() == 5
    rt.rms_norm(x, (64,), w)  # a torch call takes torch's count again, though torch's did not change
    assert rmsnorm.get_num_threads() == 2


def test_qk_norm_on_a_view_of_a_qkv_tensor():
    # QK-norm's heads are a strided view into the fused projection output; out= writes through the view
    # (in place, no copy: k and v stay as they were), and without out= the result has the same bits.
    tokens, hq, hkv, d = 6, 4, 2, 32
    qkv = torch.randn(tokens, (hq + 2 * hkv) * d)
    before = qkv.clone()
    heads = qkv.view(tokens, hq + 2 * hkv, d)
    q, k = heads[:, :hq], heads[:, hq:hq + hkv]
    assert not q.is_contiguous()
    w = torch.rand(d) + 0.5
    want_q = rt.rms_norm(q.contiguous(), (d,), w, 1e-6)
    want_k = rt.layer_norm(k.contiguous(), (d,), w, None, 1e-5)
    with torch.no_grad():
        assert torch.equal(rt.rms_norm(k, (d,), w, 1e-6), rt.rms_norm(k.contiguous(), (d,), w, 1e-6))
        assert rt.rms_norm(q, (d,), w, 1e-6, out=q) is q
        rt.layer_norm(k, (d,), w, None, 1e-5, out=k)
    assert torch.equal(heads[:, :hq], want_q)
    assert torch.equal(heads[:, hq:hq + hkv], want_k)
    assert torch.equal(qkv[:, (hq + hkv) * d:], before[:, (hq + hkv) * d:])
    # With autograd the strided input is read in place too; the gradient matches the contiguous one's.
    x = before.view(tokens, hq + 2 * hkv, d)[:, :hq].clone().requires_grad_(False)
    base = before.clone().requires_grad_(True)
    view = base.view(tokens, hq + 2 * hkv, d)[:, :hq]
    rt.rms_norm(view, (d,), w, 1e-6).square().sum().backward()
    ref = x.clone().requires_grad_(True)
    rt.rms_norm(ref, (d,), w, 1e-6).square().sum().backward()
    assert torch.equal(base.grad.view(tokens, hq + 2 * hkv, d)[:, :hq], ref.grad)


@pytest.mark.parametrize("norm", ["rms_norm", "layer_norm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_backward_reads_strided_x_and_dy_in_place(norm, dtype, monkeypatch):
    # The backward of QK-norm on its heads inside a QKV buffer: x (saved) and dy are strided views. Both
    # are read in place through the _ex call, not copied, and every gradient has the contiguous bits.
    tokens, hq, hkv, d = 5, 4, 2, 32
    g = torch.Generator().manual_seed(3)
    qkv = torch.randn(tokens, (hq + 2 * hkv) * d, generator=g).to(dtype)
    w = (torch.rand(d, generator=g) + 0.5).requires_grad_()
    b = torch.randn(d, generator=g).requires_grad_()
    dy_buffer = torch.randn(tokens, 2 * hq * d, generator=g).to(dtype)
    dy = dy_buffer.view(tokens, 2 * hq, d)[:, hq:]
    assert not dy.is_contiguous()

    def run(strided, dy):
        # Gradients of x (q's heads), weight and bias.
        base = qkv.clone().requires_grad_()
        q = base.view(tokens, hq + 2 * hkv, d)[:, :hq]
        x = q if strided else q.contiguous()
        params = [p.detach().clone().requires_grad_() for p in (w, b)]
        args = (params[0], 1e-6) if norm == "rms_norm" else (params[0], params[1], 1e-5)
        getattr(rt, norm)(x, (d,), *args).backward(dy)
        return [base.grad] + [p.grad for p in params]

    want = run(False, dy.contiguous())
    layouts = []
    plan_reads = rmsnorm._layout.plan_reads
    monkeypatch.setattr(rmsnorm._layout, "plan_reads", lambda inputs: layouts.append(plan_reads(inputs)) or layouts[-1])
    got = run(True, dy)
    assert layouts and all(layout is not None for layout in layouts[-1][1]), layouts  # no copy of dy or x
    for a, e in zip(got, want):
        assert (a is None) == (e is None)
        if e is not None:
            assert torch.equal(a, e)
