"""rms_norm and layer_norm with the signatures of torch.nn.functional's, running our kernels.

Everything is checked here, before an op is called, so a bad argument raises a Python exception that
names it: TypeError for a wrong type or dtype, ValueError for a wrong shape or value, and
NotImplementedError for tensors on a device the kernels do not run on (CUDA, until it lands).
The checks are plain Python on shapes and dtypes, which torch.compile traces without a graph break.
"""
import math
import numbers
from typing import Optional, Sequence, Union

import torch
from torch import Tensor

from .. import _layout, _runtime
from .._checks import F32_MAX, check_eps, check_offset, check_partial
from .._numpy import QUANT_FORMATS, quant_format
from . import _ops, _sharding

# torch.nn.RMSNorm's eps=None: the machine epsilon of the computation type, which is float32 for the
# float32, bfloat16 and float16 inputs the kernels take.
RMS_NORM_DEFAULT_EPS = torch.finfo(torch.float32).eps

# The library's dtypes torch has (the registry's list, through _ops._CODES), and how messages name them.
_DTYPES = tuple(_ops._CODES)
_DTYPE_NAMES = ", ".join(str(d).replace("torch.", "") for d in _DTYPES)
# meta tensors run the fake implementations: shape inference and meta-device model construction work.
_DEVICES = ("cpu", "meta")

_Shape = Union[int, Sequence[int], torch.Size]


def _find(module, name):
    return getattr(module, name, None) if module is not None else None


# Plain eager calls skip the dispatcher (see _ops.py): inference calls the kernel, training an autograd
# Function over the same kernels. That route is taken only when nothing could observe the difference:
# plain CPU tensors (no subclass such as FakeTensor), no torch-function or dispatch mode, no functorch
# transform, not compiling, not tracing (jit.trace), and arguments of the common, valid kind that a few
# cheap tests confirm. If this torch lacks any of the probes, the ops are always used.
_functorch = _find(torch._C, "_functorch")
_PROBES = (
    _find(torch._C, "_is_torch_function_mode_enabled"),
    _find(torch._C, "_len_torch_dispatch_stack"),
    _find(_functorch, "peek_interpreter_stack"),
    _find(torch._C, "_get_tracing_state"),  # torch.jit.trace records dispatcher ops only
)
_FAST_PATH = all(p is not None for p in _PROBES) and hasattr(torch.compiler, "is_compiling")
# Bound once: each module attribute lookup on the eager route is paid on every call.
_FUNCTION_MODE, _DISPATCH_DEPTH, _FUNCTORCH_LEVEL, _JIT_TRACING = _PROBES
_is_compiling = torch.compiler.is_compiling if _FAST_PATH else None
_STRIDED = torch.strided
_CODES = _ops._CODES

_PARAM_TYPES = (Tensor, torch.nn.Parameter)
_EagerRmsNorm_apply = _ops.EagerRmsNorm.apply
_rms_forward = _ops.rms_forward
# The C++ entry points when the wheel has them for this torch (see _ops.NATIVE_ENTRY), else None: the
# eager route's calls, with or without autograd, skip Python's autograd Function and the dispatcher.
_NATIVE = _ops.NATIVE_ENTRY
_torch_num_threads = torch.get_num_threads
_threads_for_torch = _runtime.threads_set_for_torch  # updated in place
_follow_torch_threads = _ops.follow_torch_threads


def _eager_cols(input, normalized_shape, weight, bias):
    """cols when the eager route may run, else 0 (and the general path checks and dispatches to the ops).

    Cheap by design: exact types and the single-dimension common case only. Anything else, including
    every kind of bad argument, goes the general way, which raises the descriptive errors.
    """
    # First: under torch.compile this is a constant and the rest is never traced.
    if not _FAST_PATH or _is_compiling():
        return 0
    if (type(input) is not Tensor or not input.is_cpu or input.layout is not _STRIDED or input.dtype not in _CODES
            or input.ndim == 0):
        return 0
    kind = type(normalized_shape)
    if kind is int:
        cols = normalized_shape
    elif kind is tuple and len(normalized_shape) == 1 and type(normalized_shape[0]) is int:
        cols = normalized_shape[0]
    else:
        return 0
    if cols < 1 or input.shape[-1] != cols:
        return 0
    if weight is not None and (type(weight) not in _PARAM_TYPES or not weight.is_cpu or weight.dtype not in _CODES
                               or weight.ndim != 1 or weight.shape[0] != cols):
        return 0
    if bias is not None and (type(bias) not in _PARAM_TYPES or not bias.is_cpu or bias.dtype not in _CODES
                             or bias.ndim != 1 or bias.shape[0] != cols):
        return 0
    if _FUNCTION_MODE() or _DISPATCH_DEPTH() or _FUNCTORCH_LEVEL() is not None or _JIT_TRACING() is not None:
        return 0
    return cols


_grad_enabled = torch.is_grad_enabled


def _needs_grad(input, weight, bias):
    return _grad_enabled() and (input.requires_grad or (weight is not None and weight.requires_grad)
                                or (bias is not None and bias.requires_grad))


def _plain_scalars(eps, partial, offset):
    # Python floats in range: eps >= 0, 0 < partial <= 1, |weight_offset| finite. NaN fails every test.
    return (type(eps) is float and 0.0 <= eps <= F32_MAX and type(partial) is float and 0.0 < partial <= 1.0
            and type(offset) is float and -F32_MAX <= offset <= F32_MAX)


def _check_device(fn, name, t):
    if not t.is_cpu and t.device.type not in _DEVICES:
        raise NotImplementedError(
            f"{fn}: {name} is on {t.device}, but the rmsnorm kernels run on the CPU only (CUDA is not "
            f"supported yet). Move the module and its inputs to the CPU, or use torch's own norm there"
        )


def _check_input(fn, input):
    if not isinstance(input, Tensor):
        raise TypeError(f"{fn}: input must be a torch.Tensor, got {type(input).__name__}")
    _check_device(fn, "input", input)
    if input.dtype not in _DTYPES:
        raise TypeError(f"{fn}: input has dtype {input.dtype}; supported are {_DTYPE_NAMES}")
    if input.layout != torch.strided:
        raise TypeError(f"{fn}: input must be a dense (strided) tensor, got layout {input.layout}")


def normalized_shape_tuple(fn, normalized_shape):
    """normalized_shape as a tuple of positive ints (an int means the last dimension only)."""
    if type(normalized_shape) is tuple and all(type(d) is int and d > 0 for d in normalized_shape) and normalized_shape:
        return normalized_shape  # what the modules pass, checked when they were built
    if isinstance(normalized_shape, numbers.Integral) and not isinstance(normalized_shape, bool):
        shape = (int(normalized_shape),)
    elif isinstance(normalized_shape, (tuple, list, torch.Size)):
        shape = tuple(normalized_shape)
        for d in shape:
            if isinstance(d, bool) or not isinstance(d, (numbers.Integral, torch.SymInt)):
                raise TypeError(f"{fn}: normalized_shape must hold ints, got {normalized_shape!r}")
    else:
        raise TypeError(f"{fn}: normalized_shape must be an int or a sequence of ints, got {normalized_shape!r}")
    if len(shape) == 0:
        raise ValueError(f"{fn}: normalized_shape must name at least one dimension")
    if any(d < 1 for d in shape):
        raise ValueError(f"{fn}: normalized_shape must be positive, got {shape}")
    return shape


def _check_shape(fn, input, normalized_shape):
    shape = normalized_shape_tuple(fn, normalized_shape)
    n = len(shape)
    if input.dim() < n or tuple(input.shape[-n:]) != shape:
        raise ValueError(
            f"{fn}: normalized_shape={list(shape)} expects input of shape [*, {', '.join(map(str, shape))}], "
            f"got {list(input.shape)}"
        )
    return shape, math.prod(shape)


def _check_param(fn, name, p, input, shape):
    if p is None:
        return None
    if not isinstance(p, Tensor):
        raise TypeError(f"{fn}: {name} must be a torch.Tensor or None, got {type(p).__name__}")
    _check_device(fn, name, p)
    if p.device != input.device:
        raise ValueError(f"{fn}: {name} is on {p.device} but input is on {input.device}")
    if p.dtype not in _DTYPES:
        raise TypeError(f"{fn}: {name} has dtype {p.dtype}; supported are {_DTYPE_NAMES}")
    if tuple(p.shape) != shape:
        raise ValueError(f"{fn}: {name} must have shape {list(shape)} (normalized_shape), got {list(p.shape)}")
    return p


def _flat(p):
    return p if p is None or p.dim() == 1 else p.reshape(-1)


def _rows(input, shape, cols):
    # The differentiable ops' input: the normalized dimensions `shape` merged into one of cols elements,
    # the leading ones kept (a DTensor sharded on one of them stays sharded), contiguous.
    lead = tuple(input.shape[:input.dim() - len(shape)]) or (1,)
    return input.reshape(*lead, cols).contiguous()


def rms_norm(
    input: Tensor,
    normalized_shape: _Shape,
    weight: Optional[Tensor] = None,
    eps: Optional[float] = None,
    *,
    partial: float = 1.0,
    weight_offset: float = 0.0,
    bias: Optional[Tensor] = None,
    out: Optional[Tensor] = None,
) -> Tensor:
    """RMSNorm over the trailing ``normalized_shape`` dimensions, as torch.nn.functional.rms_norm.

    y = x / sqrt(mean(x[:k]**2) + eps) * (weight_offset + weight) (+ bias), with k = n for RMSNorm and
    k = max(1, ceil(partial * n)) for pRMSNorm (partial < 1). eps=None uses torch.finfo(torch.float32).eps,
    as torch does for float32, bfloat16 and float16 inputs. The output has the input's dtype; weight and
    bias may have another float dtype and are used as float32.

    out: a CPU tensor of the input's shape and dtype to write y into (it may be the input itself),
    returned: contiguous, or in eager mode a strided view such as QK-norm's heads inside a QKV buffer. As with torch's out= functions there is no autograd then: with grad mode on, an
    argument that requires grad is an error.
    """
    if out is not None:
        return _rms_norm_into(input, normalized_shape, weight, eps, partial, weight_offset, bias, out)
    e = RMS_NORM_DEFAULT_EPS if eps is None else eps
    cols = _eager_cols(input, normalized_shape, weight, bias)
    # _plain_scalars and _needs_grad, inlined: this is the per-call cost of a decode step.
    if (cols and type(e) is float and 0.0 <= e <= F32_MAX and type(partial) is float and 0.0 < partial <= 1.0
            and type(weight_offset) is float and -F32_MAX <= weight_offset <= F32_MAX):
        grad = _grad_enabled() and (input.requires_grad or (weight is not None and weight.requires_grad)
                                    or (bias is not None and bias.requires_grad))
        if _NATIVE is not None:
            if _torch_num_threads() != _threads_for_torch[0]:
                _follow_torch_threads()
            y = _NATIVE.rms_norm(input, weight, bias, e, partial, weight_offset, grad)
            if y is not None:
                return y
        if grad:
            return _EagerRmsNorm_apply(input, cols, weight, bias, e, partial, weight_offset)
        return _rms_forward(input, cols, weight, bias, e, partial, weight_offset, False)[0]
    fn = "rmsnorm.torch.rms_norm"
    _check_input(fn, input)
    shape, cols = _check_shape(fn, input, normalized_shape)
    w = _check_param(fn, "weight", weight, input, shape)
    b = _check_param(fn, "bias", bias, input, shape)
    eps = RMS_NORM_DEFAULT_EPS if eps is None else check_eps(fn, eps)
    partial = check_partial(fn, partial)
    weight_offset = check_offset(fn, weight_offset)
    _sharding.ensure_registered()
    y, _ = _ops.rms_norm_fwd(_rows(input, shape, cols), _flat(w), _flat(b), eps, partial, weight_offset)
    return y.view(input.shape)


def layer_norm(
    input: Tensor,
    normalized_shape: _Shape,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
    *,
    out: Optional[Tensor] = None,
) -> Tensor:
    """LayerNorm over the trailing ``normalized_shape`` dimensions, as torch.nn.functional.layer_norm.

    out: as for rms_norm (written and returned; no autograd).
    """
    if out is not None:
        return _layer_norm_into(input, normalized_shape, weight, bias, eps, out)
    cols = _eager_cols(input, normalized_shape, weight, bias)
    if cols and _plain_scalars(eps, 1.0, 0.0):
        grad = _needs_grad(input, weight, bias)
        if _NATIVE is not None:
            if _torch_num_threads() != _threads_for_torch[0]:
                _follow_torch_threads()
            y = _NATIVE.layer_norm(input, weight, bias, eps, grad)
            if y is not None:
                return y
        if grad:
            return _ops.EagerLayerNorm.apply(input, cols, weight, bias, eps)
        return _ops.layer_forward(input, cols, weight, bias, eps, False)[0]
    fn = "rmsnorm.torch.layer_norm"
    _check_input(fn, input)
    shape, cols = _check_shape(fn, input, normalized_shape)
    w = _check_param(fn, "weight", weight, input, shape)
    b = _check_param(fn, "bias", bias, input, shape)
    eps = check_eps(fn, eps)
    _sharding.ensure_registered()
    y, _, _ = _ops.layer_norm_fwd(_rows(input, shape, cols), _flat(w), _flat(b), eps)
    return y.view(input.shape)


# ---- out= ----------------------------------------------------------------------------------------


def _refuse_autograd(fn, what, *tensors):
    # torch's out= functions refuse the same way: an output written in place has no graph to join.
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise RuntimeError(
            f"{fn}: {what} does not support automatic differentiation, but an argument requires grad. "
            f"Call it under torch.no_grad() or torch.inference_mode(), or use the out-of-place form"
        )


def _check_out(fn, out, input, eager):
    if not isinstance(out, Tensor):
        raise TypeError(f"{fn}: out must be a torch.Tensor, got {type(out).__name__}")
    _check_device(fn, "out", out)
    if out.device != input.device:
        raise ValueError(f"{fn}: out is on {out.device} but input is on {input.device}")
    if out.dtype != input.dtype:
        raise TypeError(f"{fn}: out has dtype {out.dtype}, but the output has the input's dtype {input.dtype}")
    if out.shape != input.shape:
        raise ValueError(f"{fn}: out must have the input's shape {list(input.shape)}, got {list(out.shape)}")
    if not out.is_contiguous() and (not eager or _layout.layout(
            tuple(out.shape), out.stride(), _layout.inner_rows_of(tuple(out.shape), out.stride())) is None):
        raise ValueError(f"{fn}: out must be contiguous, or (eagerly, over the last dimension) a view whose rows are "
                         f"one or two levels of evenly spaced rows in order; got strides {out.stride()}")


def _rms_norm_into(input, normalized_shape, weight, eps, partial, weight_offset, bias, out):
    fn = "rmsnorm.torch.rms_norm"
    _check_input(fn, input)
    shape, cols = _check_shape(fn, input, normalized_shape)
    w = _check_param(fn, "weight", weight, input, shape)
    b = _check_param(fn, "bias", bias, input, shape)
    eps = RMS_NORM_DEFAULT_EPS if eps is None else check_eps(fn, eps)
    partial = check_partial(fn, partial)
    weight_offset = check_offset(fn, weight_offset)
    eager = _eager_cols(input, normalized_shape, weight, bias)
    _check_out(fn, out, input, eager)
    _refuse_autograd(fn, "out=", input, w, b, out)
    if eager:
        _ops.rms_forward(input, cols, w, b, eps, partial, weight_offset, False, out=out)
    else:
        _ops.rms_norm_out(input.reshape(-1, cols).contiguous(), _flat(w), _flat(b), eps, partial, weight_offset,
                          out.view(-1, cols))
    return out


def _layer_norm_into(input, normalized_shape, weight, bias, eps, out):
    fn = "rmsnorm.torch.layer_norm"
    _check_input(fn, input)
    shape, cols = _check_shape(fn, input, normalized_shape)
    w = _check_param(fn, "weight", weight, input, shape)
    b = _check_param(fn, "bias", bias, input, shape)
    eps = check_eps(fn, eps)
    eager = _eager_cols(input, normalized_shape, weight, bias)
    _check_out(fn, out, input, eager)
    _refuse_autograd(fn, "out=", input, w, b, out)
    if eager:
        _ops.layer_forward(input, cols, w, b, eps, False, out=out)
    else:
        _ops.layer_norm_out(input.reshape(-1, cols).contiguous(), _flat(w), _flat(b), eps, out.view(-1, cols))
    return out


# ---- Fused residual add --------------------------------------------------------------------------


def _check_residual(fn, residual, input):
    if not isinstance(residual, Tensor):
        raise TypeError(f"{fn}: residual must be a torch.Tensor, got {type(residual).__name__}")
    _check_device(fn, "residual", residual)
    if residual.device != input.device:
        raise ValueError(f"{fn}: residual is on {residual.device} but input is on {input.device}")
    if residual.layout != torch.strided:
        raise TypeError(f"{fn}: residual must be a dense (strided) tensor, got layout {residual.layout}")
    if residual.dtype != input.dtype:
        raise TypeError(f"{fn}: residual has dtype {residual.dtype} but input has {input.dtype}; the fused add "
                        f"takes both in one dtype")
    if residual.shape != input.shape:
        raise ValueError(f"{fn}: residual must have the input's shape {list(input.shape)}, got "
                         f"{list(residual.shape)}")


def _add_norm_args(fn, input, residual, weight, eps, normalized_shape, partial, weight_offset, bias):
    _check_input(fn, input)
    _check_residual(fn, residual, input)
    if normalized_shape is None:
        normalized_shape = tuple(weight.shape) if isinstance(weight, Tensor) and weight.dim() > 0 else (
            input.shape[-1:] if input.dim() > 0 else ())
    shape, cols = _check_shape(fn, input, normalized_shape)
    w = _check_param(fn, "weight", weight, input, shape)
    b = _check_param(fn, "bias", bias, input, shape)
    eps = RMS_NORM_DEFAULT_EPS if eps is None else check_eps(fn, eps)
    return shape, cols, w, b, eps, check_partial(fn, partial), check_offset(fn, weight_offset)


def _eager_add_cols(input, residual, weight, bias, normalized_shape):
    """cols when add_rms_norm may take the eager route (as _eager_cols, plus a residual like the input)."""
    if normalized_shape is None:
        if weight is not None:
            if type(weight) not in _PARAM_TYPES or weight.ndim != 1:
                return 0
            normalized_shape = weight.shape[0]
        elif type(input) is Tensor and input.ndim > 0:
            normalized_shape = input.shape[-1]
        else:
            return 0
    cols = _eager_cols(input, normalized_shape, weight, bias)
    if (not cols or type(residual) is not Tensor or residual.dtype is not input.dtype or not residual.is_cpu
            or residual.layout is not _STRIDED or residual.shape != input.shape):
        return 0
    return cols


def add_rms_norm(
    input: Tensor,
    residual: Tensor,
    weight: Optional[Tensor] = None,
    eps: Optional[float] = None,
    *,
    normalized_shape: Optional[_Shape] = None,
    partial: float = 1.0,
    weight_offset: float = 0.0,
    bias: Optional[Tensor] = None,
) -> tuple:
    """The residual add of a pre-norm block fused with the RMSNorm after it: returns (y, h) with
    h = input + residual (rounded to their dtype) and y = rms_norm(h), in one pass over memory.

    input and residual have one shape and dtype. normalized_shape defaults to the weight's shape, or
    the last dimension without a weight; the other arguments are rms_norm's. Autograd reaches input and
    residual through both outputs: each gets the norm's gradient at h plus the gradient of h itself.
    """
    e = RMS_NORM_DEFAULT_EPS if eps is None else eps
    cols = _eager_add_cols(input, residual, weight, bias, normalized_shape)
    if cols and _plain_scalars(e, partial, weight_offset):
        if _needs_grad(input, weight, bias) or (_grad_enabled() and residual.requires_grad):
            return _ops.EagerAddRmsNorm.apply(input, residual, cols, weight, bias, e, partial, weight_offset)
        if _NATIVE is not None:
            if _torch_num_threads() != _threads_for_torch[0]:
                _follow_torch_threads()
            yh = _NATIVE.add_rms_norm(input, residual, weight, bias, e, partial, weight_offset)
            if yh is not None:
                return yh
        y, h, _ = _ops.rms_add_forward(input, residual, cols, weight, bias, e, partial, weight_offset, False)
        return y, h
    fn = "rmsnorm.torch.add_rms_norm"
    shape, cols, w, b, eps, partial, weight_offset = _add_norm_args(fn, input, residual, weight, eps,
                                                                    normalized_shape, partial, weight_offset, bias)
    _sharding.ensure_registered()
    y, h, _ = _ops.add_rms_norm_fwd(_rows(input, shape, cols), _rows(residual, shape, cols), _flat(w), _flat(b), eps,
                                    partial, weight_offset)
    return y.view(input.shape), h.view(input.shape)


def _overlap(a: Tensor, b: Tensor) -> bool:
    if a.numel() == 0 or b.numel() == 0:
        return False
    a0, b0 = a.data_ptr(), b.data_ptr()
    return a0 < b0 + b.numel() * b.element_size() and b0 < a0 + a.numel() * a.element_size()


def fused_add_rms_norm_(
    input: Tensor,
    residual: Tensor,
    weight: Optional[Tensor] = None,
    eps: Optional[float] = None,
    *,
    normalized_shape: Optional[_Shape] = None,
    partial: float = 1.0,
    weight_offset: float = 0.0,
    bias: Optional[Tensor] = None,
) -> tuple:
    """In place, for inference, with vLLM's fused_add_rms_norm semantics: residual <- input + residual, then
    input <- rms_norm(residual). Returns (input, residual).

    Both must be contiguous, of one shape and dtype, and distinct memory. No autograd: with grad mode on,
    an argument that requires grad is an error (use add_rms_norm).
    """
    fn = "rmsnorm.torch.fused_add_rms_norm_"
    shape, cols, w, b, eps, partial, weight_offset = _add_norm_args(fn, input, residual, weight, eps,
                                                                    normalized_shape, partial, weight_offset, bias)
    for name, t in (("input", input), ("residual", residual)):
        if not t.is_contiguous():
            raise ValueError(f"{fn}: {name} must be contiguous to be updated in place; got strides {t.stride()}")
    # Under compile data_ptr is not available; the library refuses overlapping outputs there too.
    if not torch.compiler.is_compiling() and input.device.type == "cpu" and _overlap(input, residual):
        raise ValueError(f"{fn}: input and residual share memory; both are outputs, so they must be distinct")
    _refuse_autograd(fn, "the in-place form", input, residual, w, b)
    if _eager_cols(input, (cols,), w, b) and type(residual) is Tensor:
        _ops.rms_add_forward(input, residual, cols, w, b, eps, partial, weight_offset, False, y=input, h=residual)
    else:
        _ops.fused_add_rms_norm_(input.view(-1, cols), residual.view(-1, cols), _flat(w), _flat(b), eps, partial,
                                 weight_offset)
    return input, residual


# ---- Quantized outputs ---------------------------------------------------------------------------

_Q8_0 = QUANT_FORMATS["q8_0"]


def _quant_args(fn, format, scale):
    """The format's C code, its scales kind, and the static scale as the (1) f32 tensor the kernel reads."""
    code, info = quant_format(fn, format, scale)
    if info[3] != "static":
        return code, info[3], None
    if isinstance(scale, Tensor):
        _check_device(fn, "scale", scale)
        if scale.numel() != 1 or not scale.is_floating_point():
            raise ValueError(f"{fn}: a scale tensor must hold one floating-point value, got {scale.dtype} of shape "
                             f"{list(scale.shape)}")
        return code, info[3], scale.detach().reshape(1).to(torch.float32)
    if isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"{fn}: scale must be a float or a one-element tensor, got {type(scale).__name__}")
    # The range (finite, > 0) is the library's to check; beyond the f32 range the value becomes inf.
    return code, info[3], torch.tensor([float(scale)], dtype=torch.float32)


def _refuse_grad(fn, *tensors):
    # As _refuse_autograd, without its pointer to an out-of-place form: there is no differentiable one.
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise RuntimeError(
            f"{fn} does not support automatic differentiation (inference only), but an argument requires grad. "
            f"Call it under torch.no_grad() or torch.inference_mode()"
        )


def _quant_results(input, dims, q, scales, kind, scale, format):
    """q and scales shaped for an input whose last `dims` dimensions were normalized."""
    lead = tuple(input.shape[:input.dim() - dims])
    q = q.view(*lead, q.shape[-1]) if format == _Q8_0 else q.view(input.shape)
    scales = scales.view(lead) if kind == "per_row" else (scale if kind == "static" else None)
    return q, scales


def rms_norm_quantized(
    input: Tensor,
    normalized_shape: _Shape,
    weight: Optional[Tensor] = None,
    eps: Optional[float] = None,
    *,
    format: str = "int8",
    scale=None,
    partial: float = 1.0,
    weight_offset: float = 0.0,
    bias: Optional[Tensor] = None,
) -> tuple:
    """rms_norm with its result quantized in the same pass, for the int8 or fp8 matmul (or ggml) after
    the norm: returns (q, scales). The f32 y is quantized before any rounding to the input's dtype.

    format, with q and scales for an input of shape (*, n) (n: the normalized elements):
      "int8"             q torch.int8 of the input's shape; scales float32 (*) = max|y| / 127 per row
      "fp8_e4m3"         q torch.float8_e4m3fn of the input's shape (saturating at +-448); scales float32
                         (*) = max|y| / 448 per row
      "fp8_e4m3_static"  as fp8_e4m3 with the caller's per-tensor scale (a float or a one-element tensor,
                         required; finite and > 0): q = fp8(y / scale); scales is that scale, as given
      "q8_0"             q torch.uint8 (*, n // 32 * 34), ggml block_q8_0 bytes; scales None
    Dequantized, q * scales[..., None] is y within half a step. Inference only, like vLLM's quant ops: no
    autograd, and with grad mode on an argument that requires grad is an error (use torch.no_grad() or
    torch.inference_mode()). The input is read in place when its rows are evenly spaced (eager calls).
    """
    fn = "rmsnorm.torch.rms_norm_quantized"
    _check_input(fn, input)
    shape, cols = _check_shape(fn, input, normalized_shape)
    w = _check_param(fn, "weight", weight, input, shape)
    b = _check_param(fn, "bias", bias, input, shape)
    eps = RMS_NORM_DEFAULT_EPS if eps is None else check_eps(fn, eps)
    partial = check_partial(fn, partial)
    weight_offset = check_offset(fn, weight_offset)
    code, kind, scale_arg = _quant_args(fn, format, scale)
    _refuse_grad(fn, input, w, b)
    if len(shape) == 1 and _eager_cols(input, shape, w, b):
        q, s, _ = _ops.rms_quantized(input, None, cols, w, b, eps, partial, weight_offset, code, scale_arg)
    else:
        q, s = _ops.rms_norm_quantized(input.reshape(-1, cols).contiguous(), _flat(w), _flat(b), eps, partial,
                                       weight_offset, code, scale_arg)
    return _quant_results(input, len(shape), q, s, kind, scale, code)


def add_rms_norm_quantized(
    input: Tensor,
    residual: Tensor,
    weight: Optional[Tensor] = None,
    eps: Optional[float] = None,
    *,
    normalized_shape: Optional[_Shape] = None,
    format: str = "int8",
    scale=None,
    partial: float = 1.0,
    weight_offset: float = 0.0,
    bias: Optional[Tensor] = None,
) -> tuple:
    """add_rms_norm with the normalized result quantized as rms_norm_quantized does: returns
    (q, scales, h), h = input + residual rounded to their dtype (the next block's residual) and q, scales
    the quantized rms_norm(h). Inference only, as rms_norm_quantized.
    """
    fn = "rmsnorm.torch.add_rms_norm_quantized"
    shape, cols, w, b, eps, partial, weight_offset = _add_norm_args(fn, input, residual, weight, eps,
                                                                    normalized_shape, partial, weight_offset, bias)
    code, kind, scale_arg = _quant_args(fn, format, scale)
    _refuse_grad(fn, input, residual, w, b)
    if _eager_add_cols(input, residual, w, b, (cols,)):
        q, s, h = _ops.rms_quantized(input, residual, cols, w, b, eps, partial, weight_offset, code, scale_arg)
    else:
        q, s, h = _ops.add_rms_norm_quantized(input.reshape(-1, cols).contiguous(),
                                              residual.reshape(-1, cols).contiguous(), _flat(w), _flat(b), eps,
                                              partial, weight_offset, code, scale_arg)
    return (*_quant_results(input, len(shape), q, s, kind, scale, code), h.view(input.shape))
