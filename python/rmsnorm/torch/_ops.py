"""The kernels for torch: as torch.library custom ops (fake implementations, autograd) and, for plain
eager calls, as direct calls.

Two routes, one set of kernel calls:
- The custom ops (namespace ``rmsnorm``) are what torch.compile, export, FakeTensor, dispatch modes and
  functorch see: each is a single opaque node with a fake implementation giving output shapes, and
  register_autograd routes the backward to the fused backward kernel with the statistics that the
  forward saved. The differentiable ones (rms_norm_fwd/bwd, add_rms_norm_fwd, layer_norm_fwd/bwd) take
  contiguous (*, cols) activations, normalized along the last dimension, with statistics of shape (*):
  the leading dimensions stay as they are, so a DTensor sharded on any of them stays sharded
  (_sharding.py). The others take (rows, cols). Parameters are 1-D. Besides the
  norms' forward and backward: add_rms_norm_fwd (the fused residual add, differentiable), and the
  mutating fused_add_rms_norm_ (in place), rms_norm_out and layer_norm_out (out=), which have no autograd.
- Plain eager calls (functional.py decides when; see _eager_cols there) skip the dispatcher, whose
  Python custom-op machinery costs tens of microseconds a call: more than the kernel on a decode row.
  RMSNorm and LayerNorm call the C++ entry points (rmsnorm._torch_ops, below) where the wheel has them,
  with their autograd in C++, and so does the fused add's inference. Otherwise inference calls the
  forward directly and training goes through EagerRmsNorm / EagerLayerNorm / EagerAddRmsNorm, ordinary
  autograd Functions over the same kernel calls.

    x, residual, y, h, dy, dx: (rows, cols), or any shape whose last dims hold cols elements, in f32/bf16/f16
    weight, bias: (cols) in any of those dtypes (used as f32), or None for "absent"
    mean, rstd:   (rows) float32
    dweight, dbias: (cols) float32; when not asked for, None from the kernel calls and (0,) from the ops
"""
import os
import warnings
from typing import Optional

import torch
from torch import Tensor

from .. import _C, _layout, _runtime

# The library's dtypes as torch spells them (the registry's list, rmsnorm._C.DTYPES).
_CODES = {getattr(torch, name): code for code, (_, _, _, name) in _C.DTYPES.items() if hasattr(torch, name)}


_F32 = torch.float32
_empty_like = torch.empty_like
_grad_enabled = torch.is_grad_enabled


# Every tensor whose address goes to the kernel is bound to a local first, so that it outlives the call.
def _as_f32(p: Optional[Tensor]) -> Optional[Tensor]:
    if p is None or (p.dtype is _F32 and p.is_contiguous()):
        return p
    return p.to(_F32).contiguous()


def _address(t: Optional[Tensor]) -> Optional[int]:
    return None if t is None else t.data_ptr()


def _like(x: Tensor) -> Tensor:
    # x is contiguous here, so empty_like's default (preserve the layout) is contiguous too, and cheaper
    # than naming the format; torch.empty parses more.
    return _empty_like(x)


def _stats(rows: int, wanted: bool, device) -> Optional[Tensor]:
    return torch.empty((rows,), dtype=_F32, device=device) if wanted else None


def _grad_buffer(rows: int, cols: int, wanted: bool, device) -> Optional[Tensor]:
    # The kernel overwrites it with the sum over rows; with rows = 0 it touches nothing, so then zeros.
    if not wanted:
        return None
    return torch.empty((cols,), dtype=_F32, device=device) if rows else torch.zeros((cols,), dtype=_F32, device=device)


def _or_empty(grad: Optional[Tensor], device) -> Tensor:
    # The ops' schemas return a tensor for every output: (0,) stands for a gradient not asked for.
    return torch.empty((0,), dtype=_F32, device=device) if grad is None else grad


# ---- Threads ------------------------------------------------------------------------------------

# Calls from torch run on torch's intra-op thread count, so that torch.set_num_threads governs our
# kernels as it does torch's own and the two pools do not ask for more cores than torch was given. The
# library's count is process-wide and setting it is cheap but not free, so it is set only when torch's
# count differs from the one last set here; rmsnorm.set_num_threads forgets that value (_runtime), so
# the next torch call sets torch's count again.
_torch_num_threads = torch.get_num_threads


def follow_torch_threads():
    n = _torch_num_threads()
    if n != _runtime.threads_set_for_torch[0]:
        _C.set_num_threads(n)
        _runtime.threads_set_for_torch[0] = n


# ---- The eager autograd ops in C++ ---------------------------------------------------------------

# python/src/torch_ops.cc: rms_norm and layer_norm with their autograd in C++, which saves the few
# microseconds a torch.autograd.Function costs in Python each way, as torch.ops.rmsnorm_eager and as the
# CPython module rmsnorm._torch_ops, which the eager route calls (torch.ops would add the dispatcher's
# 2 us a call, as much as F.layer_norm's whole call on a decode row). The wheel has them
# when it was built with torch present (python/CMakeLists.txt), for that torch version only: under
# another, or with RMSNORM_TORCH_OPS=0 in the environment, the Eager* Functions below run instead, with
# the same kernel calls and bits.
def _load_native_ops():
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    library, version = (os.path.join(package, name) for name in ("_torch_ops.so", "_torch_ops.torch_version"))
    if os.environ.get("RMSNORM_TORCH_OPS", "1") == "0" or not (os.path.exists(library) and os.path.exists(version)):
        return None
    with open(version) as f:
        if f.read().strip() != torch.__version__:
            return None
    try:
        torch.ops.load_library(library)
        # The same library as a CPython module: the eager route's calls without the dispatcher.
        from .. import _torch_ops as entry
    except (OSError, ImportError) as e:  # a broken install: the Python route still works
        warnings.warn(f"rmsnorm.torch: {library} did not load ({e}); eager calls take the Python route")
        return None
    return entry


# NATIVE_ENTRY.rms_norm(x, weight, bias, eps, partial, weight_offset, with_autograd) and .layer_norm(x,
# weight, bias, eps, with_autograd): y, or None for a non-contiguous x; .add_rms_norm(x, residual,
# weight, bias, eps, partial, weight_offset): (y, h) without autograd, or None. Only for the arguments
# the eager route admits (functional._eager_cols and the plain-float checks); see torch_ops.cc.
NATIVE_ENTRY = _load_native_ops()


# ---- Kernel calls -------------------------------------------------------------------------------


# out: a contiguous tensor of x's shape and dtype to write y into (checked by the caller), or None.
def rms_forward(x: Tensor, cols: int, weight, bias, eps: float, partial: float, weight_offset: float, want_rstd: bool,
                out: Optional[Tensor] = None):
    # The decode-row hot path: helpers inlined where the call would cost more than its body.
    if not x.is_contiguous() or (out is not None and not out.is_contiguous()):
        return _strided_forward("rms_forward", x, cols, weight, bias, (eps, partial, weight_offset), (want_rstd,), out)
    rows = x.numel() // cols
    w = weight if weight is None or (weight.dtype is _F32 and weight.is_contiguous()) else _as_f32(weight)
    b = bias if bias is None else _as_f32(bias)
    y = _empty_like(x) if out is None else out
    rstd = _stats(rows, True, x.device) if want_rstd else None
    if _torch_num_threads() != _runtime.threads_set_for_torch[0]:
        follow_torch_threads()
    _C.rms_forward(rows, cols, _CODES[x.dtype], eps, partial, weight_offset, x.data_ptr(),
                   None if w is None else w.data_ptr(), None if b is None else b.data_ptr(), y.data_ptr(),
                   None if rstd is None else rstd.data_ptr())
    return y, rstd


def _read_in_place(inputs):
    """(inner_rows, inputs, layouts) for a call that reads the row tensors `inputs` and writes packed
    outputs: each input read in place where its rows are evenly spaced (one or two levels), else
    copied once (contiguous); inner_rows 0 and packed layouts when all are contiguous already."""
    if all(t.is_contiguous() for t in inputs):
        return 0, inputs, [(0, 0)] * len(inputs)
    inner_rows, layouts = _layout.plan_reads([(tuple(t.shape), t.stride()) for t in inputs])
    inputs = list(inputs)
    for i, t in enumerate(inputs):
        if layouts[i] is None:
            inputs[i] = t = t.contiguous()
            layouts[i] = _layout.layout(tuple(t.shape), t.stride(), inner_rows)
    return inner_rows, inputs, layouts


def _backward(op: str, dy: Tensor, x: Tensor, cols: int, weight, stats, scalars, need_dweight: bool,
              need_dbias: bool):
    """The backward kernel `op` (rms_backward, layer_backward) for dy and x of one shape: dx packed, the
    inputs read in place where their rows are evenly spaced (a saved strided x such as QK-norm's heads in
    a QKV buffer, an expanded or strided gradient from autograd), else copied once. stats: the saved
    (rows) statistics; scalars: (eps, partial, weight_offset)."""
    if dy.dtype is not x.dtype:
        dy = dy.to(x.dtype)
    rows = x.numel() // cols
    w = _as_f32(weight)
    stats = [t.contiguous() for t in stats]
    dw, db = _grad_buffer(rows, cols, need_dweight, x.device), _grad_buffer(rows, cols, need_dbias, x.device)
    if _torch_num_threads() != _runtime.threads_set_for_torch[0]:
        follow_torch_threads()
    if x.is_contiguous() and dy.is_contiguous():
        dx = _empty_like(x)
        getattr(_C, op)(rows, cols, _CODES[x.dtype], *scalars, dy.data_ptr(), x.data_ptr(), _address(w),
                        *[t.data_ptr() for t in stats], dx.data_ptr(), _address(dw), _address(db))
        return dx, dw, db
    dx = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    inner_rows, (dy, x), (dy_layout, x_layout) = _read_in_place([dy, x])
    strides = _layout.strides_argument(x_layout, (0, 0), dy_layout=dy_layout)
    getattr(_C, op + "_ex")(rows, cols, _CODES[x.dtype], *scalars, inner_rows, strides, dy.data_ptr(), x.data_ptr(),
                            _address(w), *[t.data_ptr() for t in stats], dx.data_ptr(), _address(dw), _address(db))
    return dx, dw, db


def rms_backward(dy: Tensor, x: Tensor, cols: int, weight, rstd: Tensor, eps: float, partial: float,
                 weight_offset: float, need_dweight: bool, need_dbias: bool):
    return _backward("rms_backward", dy, x, cols, weight, (rstd,), (eps, partial, weight_offset), need_dweight,
                     need_dbias)


def rms_add_forward(x: Tensor, residual: Tensor, cols: int, weight, bias, eps: float, partial: float,
                    weight_offset: float, want_rstd: bool, y: Optional[Tensor] = None, h: Optional[Tensor] = None):
    """y = RMSNorm(h) and h = x + residual (rounded to the dtype). y and h may be given (contiguous, x's shape
    and dtype; the in-place form passes y=x, h=residual, which the C ABI allows), else they are new."""
    x, residual = x.contiguous(), residual.contiguous()
    rows = x.numel() // cols
    w, b = _as_f32(weight), _as_f32(bias)
    y = _like(x) if y is None else y
    h = _like(x) if h is None else h
    rstd = _stats(rows, want_rstd, x.device)
    follow_torch_threads()
    _C.rms_add_forward(rows, cols, _CODES[x.dtype], eps, partial, weight_offset, x.data_ptr(), residual.data_ptr(),
                       _address(w), _address(b), y.data_ptr(), h.data_ptr(), _address(rstd))
    return y, h, rstd


def layer_forward(x: Tensor, cols: int, weight, bias, eps: float, want_stats: bool, out: Optional[Tensor] = None):
    if not x.is_contiguous() or (out is not None and not out.is_contiguous()):
        return _strided_forward("layer_forward", x, cols, weight, bias, (eps, 1.0, 0.0), (want_stats, want_stats), out)
    rows = x.numel() // cols
    w, b = _as_f32(weight), _as_f32(bias)
    y = _like(x) if out is None else out
    mean, rstd = _stats(rows, want_stats, x.device), _stats(rows, want_stats, x.device)
    follow_torch_threads()
    _C.layer_forward(rows, cols, _CODES[x.dtype], eps, 1.0, 0.0, x.data_ptr(), _address(w), _address(b), y.data_ptr(),
                     _address(mean), _address(rstd))
    return y, mean, rstd


def layer_backward(dy: Tensor, x: Tensor, cols: int, weight, mean: Tensor, rstd: Tensor, eps: float,
                   need_dweight: bool, need_dbias: bool):
    return _backward("layer_backward", dy, x, cols, weight, (mean, rstd), (eps, 1.0, 0.0), need_dweight, need_dbias)


def _param_grads(need_dw, need_db, dw, db, weight_dtype, bias_dtype):
    # Gradients come back in each parameter's own dtype (a bf16 weight gets a bf16 grad), like torch's.
    return (None if not need_dw else dw if weight_dtype is _F32 else dw.to(weight_dtype),
            None if not need_db else db if bias_dtype is _F32 else db.to(bias_dtype))


def _dtype(p: Optional[Tensor]):
    return None if p is None else p.dtype


# ---- Custom ops: RMSNorm, pRMSNorm --------------------------------------------------------------


@torch.library.custom_op("rmsnorm::rms_norm_fwd", mutates_args=(), device_types="cpu")
def rms_norm_fwd(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float, partial: float, weight_offset: float
) -> tuple[Tensor, Tensor]:
    y, rstd = rms_forward(x, x.shape[-1], weight, bias, eps, partial, weight_offset, True)
    return y, rstd.view(x.shape[:-1])


@rms_norm_fwd.register_fake
def _(x, weight, bias, eps, partial, weight_offset):
    return x.new_empty(x.shape), x.new_empty(x.shape[:-1], dtype=torch.float32)


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
    dx, dw, db = rms_backward(dy, x, x.shape[-1], weight, rstd, eps, partial, weight_offset, need_dweight, need_dbias)
    return dx, _or_empty(dw, x.device), _or_empty(db, x.device)


@rms_norm_bwd.register_fake
def _(dy, x, weight, rstd, eps, partial, weight_offset, need_dweight, need_dbias):
    cols = x.shape[-1]
    return (
        x.new_empty(x.shape),
        x.new_empty((cols if need_dweight else 0,), dtype=torch.float32),
        x.new_empty((cols if need_dbias else 0,), dtype=torch.float32),
    )


def _rms_setup_context(ctx, inputs, output):
    x, weight, bias, eps, partial, weight_offset = inputs
    ctx.save_for_backward(x, weight, output[1])
    ctx.config = (eps, partial, weight_offset)
    ctx.dtypes = (_dtype(weight), _dtype(bias))
    ctx.mark_non_differentiable(output[1])


def _rms_backward(ctx, dy, _drstd):
    x, weight, rstd = ctx.saved_tensors
    need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
    dx, dw, db = rms_norm_bwd(dy, x, weight, rstd, *ctx.config, need_dw, need_db)
    return (dx if need_dx else None, *_param_grads(need_dw, need_db, dw, db, *ctx.dtypes), None, None, None)


rms_norm_fwd.register_autograd(_rms_backward, setup_context=_rms_setup_context)


# ---- Custom ops: fused residual add + RMSNorm ----------------------------------------------------


@torch.library.custom_op("rmsnorm::add_rms_norm_fwd", mutates_args=(), device_types="cpu")
def add_rms_norm_fwd(
    x: Tensor, residual: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float, partial: float,
    weight_offset: float
) -> tuple[Tensor, Tensor, Tensor]:
    y, h, rstd = rms_add_forward(x, residual, x.shape[-1], weight, bias, eps, partial, weight_offset, True)
    return y, h, rstd.view(x.shape[:-1])


@add_rms_norm_fwd.register_fake
def _(x, residual, weight, bias, eps, partial, weight_offset):
    return x.new_empty(x.shape), x.new_empty(x.shape), x.new_empty(x.shape[:-1], dtype=torch.float32)


def _add_rms_setup_context(ctx, inputs, output):
    x, residual, weight, bias, eps, partial, weight_offset = inputs
    # The norm's input is h, the second output: the backward needs it, not x or residual.
    ctx.save_for_backward(output[1], weight, output[2])
    ctx.config = (eps, partial, weight_offset)
    ctx.dtypes = (_dtype(weight), _dtype(bias))
    ctx.mark_non_differentiable(output[2])


def _sum_with_h_grad(dh_norm: Tensor, dh: Optional[Tensor]) -> Tensor:
    # h feeds the norm and whatever the caller does with it (the next residual): both gradients add up.
    return dh_norm if dh is None else dh_norm.add_(dh)


def _add_rms_backward(ctx, dy, dh, _drstd):
    h, weight, rstd = ctx.saved_tensors
    need_dx, need_dres, need_dw, need_db = ctx.needs_input_grad[:4]
    dh_norm, dw, db = rms_norm_bwd(dy, h, weight, rstd, *ctx.config, need_dw, need_db)
    dh_total = _sum_with_h_grad(dh_norm, dh)
    # Both inputs get the same gradient; a second tensor, so that accumulating into one .grad later
    # cannot change the other.
    dres = (dh_total.clone() if need_dx else dh_total) if need_dres else None
    return (dh_total if need_dx else None, dres, *_param_grads(need_dw, need_db, dw, db, *ctx.dtypes),
            None, None, None)


add_rms_norm_fwd.register_autograd(_add_rms_backward, setup_context=_add_rms_setup_context)


@torch.library.custom_op("rmsnorm::fused_add_rms_norm_", mutates_args=("x", "residual"), device_types="cpu")
def fused_add_rms_norm_(
    x: Tensor, residual: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float, partial: float,
    weight_offset: float
) -> None:
    rms_add_forward(x, residual, x.shape[1], weight, bias, eps, partial, weight_offset, False, y=x, h=residual)


@fused_add_rms_norm_.register_fake
def _(x, residual, weight, bias, eps, partial, weight_offset):
    return None


def _strided_forward(op, x, cols, weight, bias, scalars, wanted_stats, out):
    """A forward on a non-contiguous x or out through the _ex call: x is read in place where its rows are
    one or two levels of evenly spaced rows (QK-norm's heads inside a QKV buffer), else copied once; y is
    out, or a new contiguous tensor. Returns y and the statistics asked for."""
    rows = x.numel() // cols
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device) if out is None else out
    inner_rows, x_layout, y_layout = _layout.plan(tuple(x.shape), x.stride(), tuple(y.shape), y.stride())
    if y_layout is None:
        raise ValueError(f"out's rows must be addressable as at most two levels of strides in row order "
                         f"(got strides {y.stride()}); pass a contiguous out")
    if x_layout is None:
        x = x.contiguous()
        x_layout = _layout.layout(tuple(x.shape), x.stride(), inner_rows)
    w, b = _as_f32(weight), _as_f32(bias)
    stats = [_stats(rows, wanted, x.device) for wanted in wanted_stats]
    follow_torch_threads()
    getattr(_C, op + "_ex")(rows, cols, _CODES[x.dtype], *scalars, inner_rows,
                            _layout.strides_argument(x_layout, y_layout), x.data_ptr(), _address(w), _address(b),
                            y.data_ptr(), *[_address(t) for t in stats])
    return (y, *stats)


# ---- Custom ops: out= forms (no autograd, as torch's own out= functions) --------------------------


@torch.library.custom_op("rmsnorm::rms_norm_out", mutates_args=("out",), device_types="cpu")
def rms_norm_out(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float, partial: float, weight_offset: float,
    out: Tensor
) -> None:
    rms_forward(x, x.shape[1], weight, bias, eps, partial, weight_offset, False, out=out)


@rms_norm_out.register_fake
def _(x, weight, bias, eps, partial, weight_offset, out):
    return None


@torch.library.custom_op("rmsnorm::layer_norm_out", mutates_args=("out",), device_types="cpu")
def layer_norm_out(x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float, out: Tensor) -> None:
    layer_forward(x, x.shape[1], weight, bias, eps, False, out=out)


@layer_norm_out.register_fake
def _(x, weight, bias, eps, out):
    return None


# ---- Custom ops: LayerNorm ----------------------------------------------------------------------


@torch.library.custom_op("rmsnorm::layer_norm_fwd", mutates_args=(), device_types="cpu")
def layer_norm_fwd(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float
) -> tuple[Tensor, Tensor, Tensor]:
    y, mean, rstd = layer_forward(x, x.shape[-1], weight, bias, eps, True)
    return y, mean.view(x.shape[:-1]), rstd.view(x.shape[:-1])


@layer_norm_fwd.register_fake
def _(x, weight, bias, eps):
    lead = x.shape[:-1]
    return x.new_empty(x.shape), x.new_empty(lead, dtype=torch.float32), x.new_empty(lead, dtype=torch.float32)


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
    dx, dw, db = layer_backward(dy, x, x.shape[-1], weight, mean, rstd, eps, need_dweight, need_dbias)
    return dx, _or_empty(dw, x.device), _or_empty(db, x.device)


@layer_norm_bwd.register_fake
def _(dy, x, weight, mean, rstd, eps, need_dweight, need_dbias):
    cols = x.shape[-1]
    return (
        x.new_empty(x.shape),
        x.new_empty((cols if need_dweight else 0,), dtype=torch.float32),
        x.new_empty((cols if need_dbias else 0,), dtype=torch.float32),
    )


def _layer_setup_context(ctx, inputs, output):
    x, weight, bias, eps = inputs
    ctx.save_for_backward(x, weight, output[1], output[2])
    ctx.eps = eps
    ctx.dtypes = (_dtype(weight), _dtype(bias))
    ctx.mark_non_differentiable(output[1], output[2])


def _layer_backward(ctx, dy, _dmean, _drstd):
    x, weight, mean, rstd = ctx.saved_tensors
    need_dx, need_dw, need_db = ctx.needs_input_grad[:3]
    dx, dw, db = layer_norm_bwd(dy, x, weight, mean, rstd, ctx.eps, need_dw, need_db)
    return (dx if need_dx else None, *_param_grads(need_dw, need_db, dw, db, *ctx.dtypes), None)


layer_norm_fwd.register_autograd(_layer_backward, setup_context=_layer_setup_context)


# ---- Eager training: the same kernels as plain autograd Functions ------------------------------


def _eager_rms_backward(ctx, dy):
    x, weight, rstd = ctx.saved_tensors
    need_dx, _, need_dw, need_db = ctx.needs_input_grad[:4]
    cols, eps, partial, weight_offset, weight_dtype, bias_dtype = ctx.config
    dx, dw, db = rms_backward(dy, x, cols, weight, rstd, eps, partial, weight_offset, need_dw, need_db)
    return (dx if need_dx else None, None, *_param_grads(need_dw, need_db, dw, db, weight_dtype, bias_dtype),
            None, None, None)


_eager_rms_backward_once = torch.autograd.function.once_differentiable(_eager_rms_backward)


class EagerRmsNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cols, weight, bias, eps, partial, weight_offset):
        y, rstd = rms_forward(x, cols, weight, bias, eps, partial, weight_offset, True)
        ctx.save_for_backward(x, weight, rstd)
        ctx.config = (cols, eps, partial, weight_offset, _dtype(weight), _dtype(bias))
        return y

    @staticmethod
    def backward(ctx, dy):
        # The engine runs a backward without grad mode unless create_graph=True; only then is
        # once_differentiable's guard (an error on double backward) needed, and its no_grad block paid.
        if _grad_enabled():
            return _eager_rms_backward_once(ctx, dy)
        return _eager_rms_backward(ctx, dy)


def _eager_layer_backward(ctx, dy):
    x, weight, mean, rstd = ctx.saved_tensors
    need_dx, _, need_dw, need_db = ctx.needs_input_grad[:4]
    cols, eps, weight_dtype, bias_dtype = ctx.config
    dx, dw, db = layer_backward(dy, x, cols, weight, mean, rstd, eps, need_dw, need_db)
    return (dx if need_dx else None, None, *_param_grads(need_dw, need_db, dw, db, weight_dtype, bias_dtype), None)


_eager_layer_backward_once = torch.autograd.function.once_differentiable(_eager_layer_backward)


class EagerLayerNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, cols, weight, bias, eps):
        y, mean, rstd = layer_forward(x, cols, weight, bias, eps, True)
        ctx.save_for_backward(x, weight, mean, rstd)
        ctx.config = (cols, eps, _dtype(weight), _dtype(bias))
        return y

    @staticmethod
    def backward(ctx, dy):
        # As EagerRmsNorm.backward: the double-backward guard only where grad mode is on.
        if _grad_enabled():
            return _eager_layer_backward_once(ctx, dy)
        return _eager_layer_backward(ctx, dy)


def _eager_add_rms_backward(ctx, dy, dh):
    h, weight, rstd = ctx.saved_tensors
    need_dx, need_dres, _, need_dw, need_db = ctx.needs_input_grad[:5]
    cols, eps, partial, weight_offset, weight_dtype, bias_dtype = ctx.config
    dh_norm, dw, db = rms_backward(dy, h, cols, weight, rstd, eps, partial, weight_offset, need_dw, need_db)
    dh_total = _sum_with_h_grad(dh_norm, dh)
    dres = (dh_total.clone() if need_dx else dh_total) if need_dres else None
    return (dh_total if need_dx else None, dres, None, *_param_grads(need_dw, need_db, dw, db, weight_dtype, bias_dtype),
            None, None, None)


_eager_add_rms_backward_once = torch.autograd.function.once_differentiable(_eager_add_rms_backward)


class EagerAddRmsNorm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, residual, cols, weight, bias, eps, partial, weight_offset):
        y, h, rstd = rms_add_forward(x, residual, cols, weight, bias, eps, partial, weight_offset, True)
        ctx.save_for_backward(h, weight, rstd)
        ctx.config = (cols, eps, partial, weight_offset, _dtype(weight), _dtype(bias))
        return y, h

    @staticmethod
    def backward(ctx, dy, dh):
        # As EagerRmsNorm.backward.
        if _grad_enabled():
            return _eager_add_rms_backward_once(ctx, dy, dh)
        return _eager_add_rms_backward(ctx, dy, dh)


# ---- Quantized outputs (inference only: no autograd) --------------------------------------------

# q's dtype by the format's C code (rmsnorm._C.QUANT_FORMATS): int8, fp8 as torch's float8_e4m3fn
# (the same OCP E4M3FN bits), q8_0's ggml blocks as bytes.
_QUANT_DTYPES = {code: {"RMSNORM_QUANT_INT8_ROW": torch.int8, "RMSNORM_QUANT_Q8_0": torch.uint8}.get(
    name, torch.float8_e4m3fn) for code, (name, _, _, _) in _C.QUANT_FORMATS.items()}


def quant_width(cols, format: int):
    """Elements of q a row: cols, or the bytes of cols // 32 q8_0 blocks."""
    _, unit_bytes, unit_cols, _ = _C.QUANT_FORMATS[format]
    return cols // unit_cols * unit_bytes


def _quant_outputs(rows: int, cols: int, format: int, device):
    q = torch.empty((rows, quant_width(cols, format)), dtype=_QUANT_DTYPES[format], device=device)
    per_row = _C.QUANT_FORMATS[format][3] == "per_row"
    return q, torch.empty((rows if per_row else 0,), dtype=_F32, device=device)


def rms_quantized(x: Tensor, residual: Optional[Tensor], cols: int, weight, bias, eps: float, partial: float,
                  weight_offset: float, format: int, scale: Optional[Tensor]):
    """RMSNorm of x (or of h = x + residual) quantized: q (rows, quant_width), scales (rows) for a per-row
    format else (0,), and h (x's shape and dtype) or None. x and residual may be strided: read in place
    where their rows are evenly spaced, else copied once. scale: the static format's (1) f32 tensor."""
    rows = x.numel() // cols
    inner_rows, inputs, layouts = _read_in_place([x] if residual is None else [x, residual])
    w, b = _as_f32(weight), _as_f32(bias)
    q, scales = _quant_outputs(rows, cols, format, x.device)
    scales_arg = scales if _C.QUANT_FORMATS[format][3] == "per_row" else scale  # static: read; q8_0: None
    follow_torch_threads()
    code = _CODES[x.dtype]
    if residual is None:
        strides = _layout.strides_argument(layouts[0], (0, 0))
        _C.rms_forward_quantized(rows, cols, code, eps, partial, weight_offset, inner_rows, strides, format,
                                 inputs[0].data_ptr(), _address(w), _address(b), q.data_ptr(), _address(scales_arg),
                                 None)
        return q, scales, None
    h = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    strides = _layout.strides_argument(layouts[0], (0, 0), layouts[1], (0, 0))
    _C.rms_add_forward_quantized(rows, cols, code, eps, partial, weight_offset, inner_rows, strides, format,
                                 inputs[0].data_ptr(), inputs[1].data_ptr(), _address(w), _address(b), q.data_ptr(),
                                 _address(scales_arg), h.data_ptr(), None)
    return q, scales, h


@torch.library.custom_op("rmsnorm::rms_norm_quantized", mutates_args=(), device_types="cpu")
def rms_norm_quantized(
    x: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float, partial: float, weight_offset: float,
    format: int, scale: Optional[Tensor]
) -> tuple[Tensor, Tensor]:
    q, scales, _ = rms_quantized(x, None, x.shape[1], weight, bias, eps, partial, weight_offset, format, scale)
    return q, scales


@rms_norm_quantized.register_fake
def _(x, weight, bias, eps, partial, weight_offset, format, scale):
    return _quant_outputs(x.shape[0], x.shape[1], format, x.device)


@torch.library.custom_op("rmsnorm::add_rms_norm_quantized", mutates_args=(), device_types="cpu")
def add_rms_norm_quantized(
    x: Tensor, residual: Tensor, weight: Optional[Tensor], bias: Optional[Tensor], eps: float, partial: float,
    weight_offset: float, format: int, scale: Optional[Tensor]
) -> tuple[Tensor, Tensor, Tensor]:
    return rms_quantized(x, residual, x.shape[1], weight, bias, eps, partial, weight_offset, format, scale)


@add_rms_norm_quantized.register_fake
def _(x, residual, weight, bias, eps, partial, weight_offset, format, scale):
    return (*_quant_outputs(x.shape[0], x.shape[1], format, x.device), x.new_empty(x.shape))
