"""torch.compile(fullgraph=True) runs our ops without graph breaks and gives eager's results.

Kept small: one Inductor compile (the real thing), the rest on the cheaper aot_eager backend, which
still traces with fake tensors and our fake implementations, and builds the backward graph.
"""
import pytest
import torch
from torch import nn

import rmsnorm.torch as rt


class Net(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.inp = nn.Linear(d, d)
        self.norm = rt.RMSNorm(d, partial=0.5)
        self.ln = rt.LayerNorm(d)
        self.out = nn.Linear(d, 4)

    def forward(self, x):
        return self.out(self.ln(torch.relu(self.norm(self.inp(x)))))


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def step(model, x):
    model.zero_grad(set_to_none=True)
    y = model(x)
    y.pow(2).sum().backward()
    return y.detach(), [p.grad.clone() for p in model.parameters()]


def test_inductor_fullgraph_forward_and_backward():
    torch.manual_seed(0)
    model = Net()
    x = torch.randn(8, 32)
    y_eager, g_eager = step(model, x)
    compiled = torch.compile(model, fullgraph=True)
    y_comp, g_comp = step(compiled, x)
    torch.testing.assert_close(y_comp, y_eager, rtol=1e-5, atol=1e-5)
    for a, b in zip(g_comp, g_eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_graph_holds_our_ops_and_no_breaks():
    torch.manual_seed(0)
    model = Net()
    explanation = torch._dynamo.explain(model)(torch.randn(4, 32))
    assert explanation.graph_break_count == 0
    assert explanation.graph_count == 1
    code = "\n".join(g.code for g in explanation.graphs)
    assert "rmsnorm.rms_norm_fwd" in code and "rmsnorm.layer_norm_fwd" in code


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_functional_under_compile_dynamic_shapes(dtype):
    torch.manual_seed(0)
    w = (torch.rand(48) + 0.5).to(dtype).requires_grad_()

    def f(x):
        return rt.rms_norm(x, (48,), w, 1e-5) + rt.layer_norm(x, (48,), w, None)

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=True)
    for rows in (3, 7, 1):
        x = torch.randn(rows, 2, 48).to(dtype).requires_grad_()
        y = compiled(x)
        y_ref = f(x)
        torch.testing.assert_close(y, y_ref)
        (gx, gw), (rx, rw) = (torch.autograd.grad(t.float().sum(), (x, w)) for t in (y, y_ref))
        torch.testing.assert_close(gx, rx)
        torch.testing.assert_close(gw, rw)


def test_inference_under_compile_no_grad():
    model = Net().eval()
    x = torch.randn(5, 32)
    with torch.no_grad():
        expect = model(x)
        got = torch.compile(model, fullgraph=True, backend="aot_eager")(x)
    torch.testing.assert_close(got, expect)
