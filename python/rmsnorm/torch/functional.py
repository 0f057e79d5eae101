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

from .._checks import F32_MAX, check_eps, check_offset, check_partial
from . import _ops

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

_PARAM_TYPES = (Tensor, torch.nn.Parameter)


def _eager_cols(input, normalized_shape, weight, bias):
    """cols when the eager route may run, else 0 (and the general path checks and dispatches to the ops).

    Cheap by design: exact types and the single-dimension common case only. Anything else, including
    every kind of bad argument, goes the general way, which raises the descriptive errors.
    """
    # First: under torch.compile this is a constant and the rest is never traced.
    if not _FAST_PATH or torch.compiler.is_compiling():
        return 0
    if type(input) is not Tensor or not input.is_cpu or input.layout != torch.strided:
        return 0
    if type(normalized_shape) is int:
        cols = normalized_shape
    elif type(normalized_shape) is tuple and len(normalized_shape) == 1 and type(normalized_shape[0]) is int:
        cols = normalized_shape[0]
    else:
        return 0
    if cols < 1 or input.dim() < 1 or input.shape[-1] != cols or input.dtype not in _ops._CODES:
        return 0
    for p in (weight, bias):
        if p is not None:
            if (type(p) not in _PARAM_TYPES or not p.is_cpu or p.dtype not in _ops._CODES or p.dim() != 1
                    or p.shape[0] != cols):
                return 0
    mode_enabled, dispatch_stack, interpreter, jit_tracing = _PROBES
    if mode_enabled() or dispatch_stack() != 0 or interpreter() is not None or jit_tracing() is not None:
        return 0
    return cols


def _needs_grad(input, weight, bias):
    return torch.is_grad_enabled() and (input.requires_grad or (weight is not None and weight.requires_grad)
                                        or (bias is not None and bias.requires_grad))


def _plain_scalars(*values):
    # Python floats in range: eps >= 0, 0 < partial <= 1, |weight_offset| finite. NaN fails every test.
    eps, partial, offset = values
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


def rms_norm(
    input: Tensor,
    normalized_shape: _Shape,
    weight: Optional[Tensor] = None,
    eps: Optional[float] = None,
    *,
    partial: float = 1.0,
    weight_offset: float = 0.0,
    bias: Optional[Tensor] = None,
) -> Tensor:
    """RMSNorm over the trailing ``normalized_shape`` dimensions, as torch.nn.functional.rms_norm.

    y = x / sqrt(mean(x[:k]**2) + eps) * (weight_offset + weight) (+ bias), with k = n for RMSNorm and
    k = max(1, ceil(partial * n)) for pRMSNorm (partial < 1). eps=None uses torch.finfo(torch.float32).eps,
    as torch does for float32, bfloat16 and float16 inputs. The output has the input's dtype; weight and
    bias may have another float dtype and are used as float32.
    """
    e = RMS_NORM_DEFAULT_EPS if eps is None else eps
    cols = _eager_cols(input, normalized_shape, weight, bias)
    if cols and _plain_scalars(e, partial, weight_offset):
        if _needs_grad(input, weight, bias):
            return _ops.EagerRmsNorm.apply(input, cols, weight, bias, e, partial, weight_offset)
        return _ops.rms_forward(input, cols, weight, bias, e, partial, weight_offset, False)[0]
    fn = "rmsnorm.torch.rms_norm"
    _check_input(fn, input)
    shape, cols = _check_shape(fn, input, normalized_shape)
    w = _check_param(fn, "weight", weight, input, shape)
    b = _check_param(fn, "bias", bias, input, shape)
    eps = RMS_NORM_DEFAULT_EPS if eps is None else check_eps(fn, eps)
    partial = check_partial(fn, partial)
    weight_offset = check_offset(fn, weight_offset)
    x = input.reshape(-1, cols).contiguous()
    y, _ = _ops.rms_norm_fwd(x, _flat(w), _flat(b), eps, partial, weight_offset)
    return y.view(input.shape)


def layer_norm(
    input: Tensor,
    normalized_shape: _Shape,
    weight: Optional[Tensor] = None,
    bias: Optional[Tensor] = None,
    eps: float = 1e-5,
) -> Tensor:
    """LayerNorm over the trailing ``normalized_shape`` dimensions, as torch.nn.functional.layer_norm."""
    cols = _eager_cols(input, normalized_shape, weight, bias)
    if cols and _plain_scalars(eps, 1.0, 0.0):
        if _needs_grad(input, weight, bias):
            return _ops.EagerLayerNorm.apply(input, cols, weight, bias, eps)
        return _ops.layer_forward(input, cols, weight, bias, eps, False)[0]
    fn = "rmsnorm.torch.layer_norm"
    _check_input(fn, input)
    shape, cols = _check_shape(fn, input, normalized_shape)
    w = _check_param(fn, "weight", weight, input, shape)
    b = _check_param(fn, "bias", bias, input, shape)
    eps = check_eps(fn, eps)
    x = input.reshape(-1, cols).contiguous()
    y, _, _ = _ops.layer_norm_fwd(x, _flat(w), _flat(b), eps)
    return y.view(input.shape)
