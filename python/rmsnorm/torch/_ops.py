"""The kernels as torch.library custom ops, with fake (meta) implementations and autograd.

Each op takes 2-D contiguous (rows, cols) activations and 1-D parameters; rmsnorm.torch.functional
reshapes and checks everything before calling them. Being opaque custom ops, they appear as single
nodes to torch.compile (no graph breaks) and the fake implementations give the output shapes without
running a kernel. The forward returns the f32 per-row statistics it computed anyway; autograd saves them
so the fused backward kernel does not recompute them.

    x, y, dy, dx: (rows, cols) in float32/bfloat16/float16
    weight, bias: (cols) in any of those (used as f32); None for "absent"
    mean, rstd:   (rows) float32
    dweight, dbias: (cols) float32, or (0,) when not asked for
"""
from typing import Optional

import torch
from torch import Tensor

from .. import _C

_CODES = {torch.float32: _C.F32, torch.bfloat16: _C.BF16, torch.float16: _C.F16}


# Every tensor whose address goes to the kernel is bound to a local first, so that it outlives the call.
def _as_f32(p: Optional[Tensor]) -> Optional[Tensor]:
    if p is None or (p.dtype == torch.float32 and p.is_contiguous()):
        return p
    return p.to(torch.float32).contiguous()


def _address(t: Optional[Tensor]) -> Optional[int]:
    return None if t is None else t.data_ptr()


def _grad_buffer(cols: int, wanted: bool, device) -> Tensor:
    # Zeros, not empty: with rows = 0 the kernel touches nothing and the sum over no rows is 0.
    return torch.zeros((cols if wanted else 0,), dtype=torch.float32, device=device)


# ---- Eager inference ------------------------------------------------------------------------------
# functional.py calls these for plain CPU tensors when no autograd, mode or tracing is involved (see
# _direct there). They take the input in its own shape and allocate nothing but the output: no reshape,
# no view, no statistics.


def rms_norm_direct(input: Tensor, cols: int, weight, bias, eps: float, partial: float, weight_offset: float):
    x = input.contiguous()
    w, b = _as_f32(weight), _as_f32(bias)
    y = torch.empty(x.shape, dtype=x.dtype)
    _C.rms_forward(x.numel() // cols, cols, _CODES[x.dtype], eps, partial, weight_offset, x.data_ptr(), _address(w),
                   _address(b), y.data_ptr(), None)
    return y


def layer_norm_direct(input: Tensor, cols: int, weight, bias, eps: float):
    x = input.contiguous()
    w, b = _as_f32(weight), _as_f32(bias)
    y = torch.empty(x.shape, dtype=x.dtype)
    _C.layer_forward(x.numel() // cols, cols, _CODES[x.dtype], eps, 0.0, x.data_ptr(), _address(w), _address(b),
                     y.data_ptr(), None, None)
    return y


# ---- RMSNorm, pRMSNorm ----------------------------------------------------------------------------


def _rms_norm_fwd_cpu(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float, partial: float, weight_offset: float
) -> tuple[Tensor, Tensor]:
    x = x.contiguous()
    rows, cols = x.shape
    w, b = _as_f32(weight), _as_f32(bias)
    y = torch.empty((rows, cols), dtype=x.dtype)
    rstd = torch.empty((rows,), dtype=torch.float32)
    _C.rms_forward(rows, cols, _CODES[x.dtype], eps, partial, weight_offset, x.data_ptr(), _address(w),
                   _address(b), y.data_ptr(), rstd.data_ptr())
    return y, rstd


rms_norm_fwd = torch.library.custom_op("rmsnorm::rms_norm_fwd", _rms_norm_fwd_cpu, mutates_args=(), device_types="cpu")


@rms_norm_fwd.register_fake
def _(x, weight, bias, eps, partial, weight_offset):
    return x.new_empty(x.shape), x.new_empty((x.shape[0],), dtype=torch.float32)


@torch.library.custom_op("rmsnorm::rms_norm_bwd", mutates_args=(), device_types="cpu")
def rms_norm_bwd(
    dy: Tensor,
    x: Tensor,
    weight: Optional[Tensor],
    rstd: Tensor,
    eps: float,
    partial: float,
    weight_offset: float,
    need_dweight: bool,
    need_dbias: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    x = x.contiguous()
    dy = dy.to(x.dtype).contiguous()  # autograd may hand over an expanded or strided gradient
    rows, cols = x.shape
    w, rstd = _as_f32(weight), rstd.contiguous()
    dx = torch.empty((rows, cols), dtype=x.dtype)
    dw = _grad_buffer(cols, need_dweight, x.device)
    db = _grad_buffer(cols, need_dbias, x.device)
    _C.rms_backward(rows, cols, _CODES[x.dtype], eps, partial, weight_offset, dy.data_ptr(), x.data_ptr(),
                    _address(w), rstd.data_ptr(), dx.data_ptr(), dw.data_ptr() if need_dweight else None,
                    db.data_ptr() if need_dbias else None)
    return dx, dw, db


@rms_norm_bwd.register_fake
def _(dy, x, weight, rstd, eps, partial, weight_offset, need_dweight, need_dbias):
    cols = x.shape[1]
    return (
        x.new_empty(x.shape),
        x.new_empty((cols if need_dweight else 0,), dtype=torch.float32),
        x.new_empty((cols if need_dbias else 0,), dtype=torch.float32),
    )


def _rms_setup_context(ctx, inputs, output):
    x, weight, bias, eps, partial, weight_offset = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.config = (eps, partial, weight_offset)
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.mark_non_differentiable(output[1])


def _rms_backward(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
    dx, dw, db = rms_norm_bwd(dy, x, weight, rstd, *ctx.config, need_dw, need_db)
    # Gradients come back in each parameter's own dtype (a bf16 weight gets a bf16 grad), like torch's.
    return (
        dx if need_dx else None,
        dw.to(weight.dtype) if need_dw else None,
        db.to(ctx.bias_dtype) if need_db else None,
        None,
        None,
        None,
    )


rms_norm_fwd.register_autograd(_rms_backward, setup_context=_rms_setup_context)


# ---- LayerNorm ---------------------------------------------------------------------------------------


def _layer_norm_fwd_cpu(x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float) -> tuple[Tensor, Tensor, Tensor]:
    x = x.contiguous()
    rows, cols = x.shape
    w, b = _as_f32(weight), _as_f32(bias)
    y = torch.empty((rows, cols), dtype=x.dtype)
    mean = torch.empty((rows,), dtype=torch.float32)
    rstd = torch.empty((rows,), dtype=torch.float32)
    _C.layer_forward(rows, cols, _CODES[x.dtype], eps, 0.0, x.data_ptr(), _address(w), _address(b), y.data_ptr(),
                     mean.data_ptr(), rstd.data_ptr())
    return y, mean, rstd


layer_norm_fwd = torch.library.custom_op(
    "rmsnorm::layer_norm_fwd", _layer_norm_fwd_cpu, mutates_args=(), device_types="cpu"
)


@layer_norm_fwd.register_fake
def _(x, weight, bias, eps):
    rows = x.shape[0]
    return x.new_empty(x.shape), x.new_empty((rows,), dtype=torch.float32), x.new_empty((rows,), dtype=torch.float32)


@torch.library.custom_op("rmsnorm::layer_norm_bwd", mutates_args=(), device_types="cpu")
def layer_norm_bwd(
    dy: Tensor,
    x: Tensor,
    weight: Optional[Tensor],
    mean: Tensor,
    rstd: Tensor,
    eps: float,
    need_dweight: bool,
    need_dbias: bool,
) -> tuple[Tensor, Tensor, Tensor]:
    x = x.contiguous()
    dy = dy.to(x.dtype).contiguous()
    rows, cols = x.shape
    w, mean, rstd = _as_f32(weight), mean.contiguous(), rstd.contiguous()
    dx = torch.empty((rows, cols), dtype=x.dtype)
    dw = _grad_buffer(cols, need_dweight, x.device)
    db = _grad_buffer(cols, need_dbias, x.device)
    _C.layer_backward(rows, cols, _CODES[x.dtype], eps, 0.0, dy.data_ptr(), x.data_ptr(), _address(w),
                      mean.data_ptr(), rstd.data_ptr(), dx.data_ptr(),
                      dw.data_ptr() if need_dweight else None, db.data_ptr() if need_dbias else None)
    return dx, dw, db


@layer_norm_bwd.register_fake
def _(dy, x, weight, mean, rstd, eps, need_dweight, need_dbias):
    cols = x.shape[1]
    return (
        x.new_empty(x.shape),
        x.new_empty((cols if need_dweight else 0,), dtype=torch.float32),
        x.new_empty((cols if need_dbias else 0,), dtype=torch.float32),
    )


def _layer_setup_context(ctx, inputs, output):
    x, weight, bias, eps = inputs
    ctx.save_for_backward(x, weight, output[1], output[2])
    ctx.eps = eps
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.mark_non_differentiable(output[1], output[2])


def _layer_backward(ctx, dy, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
    dx, dw, db = layer_norm_bwd(dy, x, weight, mean, rstd, ctx.eps, need_dw, need_db)
    return (
        dx if need_dx else None,
        dw.to(weight.dtype) if need_dw else None,
        db.to(ctx.bias_dtype) if need_db else None,
        None,
    )


layer_norm_fwd.register_autograd(_layer_backward, setup_context=_layer_setup_context)
