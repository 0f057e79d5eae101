"""The NumPy front end: each function normalizes the last axis of an array of any leading shape.

x may be float32, float16, or bfloat16 as NumPy holds it through ml_dtypes; the output has x's dtype.
weight and bias may be any of those dtypes or float64 and are used as float32, which is what the kernels
take (the statistics and the arithmetic are f32 or wider whatever the storage).
"""
import numpy as np

from . import _C, _layout
from ._checks import check_eps, check_offset, check_partial

# The library's dtypes by NumPy name (the registry's list, rmsnorm._C.DTYPES). Keyed by dtype object:
# dtype.name costs microseconds per call. A dtype NumPy itself lacks (ml_dtypes' bfloat16) joins on first
# sight, recognized by name and size, so that ml_dtypes stays optional.
_BY_NUMPY_NAME = {numpy: (code, itemsize) for code, (_, itemsize, numpy, _) in _C.DTYPES.items()}
_CODES = {}
for _name, (_code, _) in _BY_NUMPY_NAME.items():
    if hasattr(np, _name):
        _CODES[np.dtype(_name)] = _code
_PARAM_DTYPES = set(_CODES) | {np.dtype(np.float64)}
_SUPPORTED = ", ".join(name if hasattr(np, name) else f"{name} (ml_dtypes)" for name in _BY_NUMPY_NAME)


def _late_code(dtype):
    code, itemsize = _BY_NUMPY_NAME.get(dtype.name, (None, None))
    return code if itemsize == dtype.itemsize else None


def _dtype_code(fn, x):
    code = _CODES.get(x.dtype)
    if code is None:
        code = _late_code(x.dtype)
        if code is None:
            raise TypeError(
                f"{fn}: x has dtype {x.dtype}; supported are {_SUPPORTED}. Convert first, e.g. x.astype(np.float32)"
            )
        _CODES[x.dtype] = code
        _PARAM_DTYPES.add(x.dtype)
    return code


def _input(fn, x):
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{fn}: x must be a numpy.ndarray, got {type(x).__name__}")
    code = _dtype_code(fn, x)
    if x.ndim == 0:
        raise ValueError(f"{fn}: x must have at least one axis (the one normalized), got a 0-d array")
    if x.shape[-1] == 0:
        raise ValueError(f"{fn}: the last axis of x must not be empty, got shape {x.shape}")
    return x, code


def _element_strides(a):
    """a's strides in elements, or None when one is not a whole number of elements."""
    size = a.itemsize
    return None if any(st % size for st in a.strides) else tuple(st // size for st in a.strides)


def _address(a):
    return a.__array_interface__["data"][0]


def _param(fn, name, p, cols):
    if p is None:
        return None
    if not isinstance(p, np.ndarray):
        raise TypeError(f"{fn}: {name} must be a numpy.ndarray or None, got {type(p).__name__}")
    if p.dtype not in _PARAM_DTYPES and _late_code(p.dtype) is None:
        raise TypeError(f"{fn}: {name} has dtype {p.dtype}; use float32, float16, bfloat16 or float64")
    if p.shape != (cols,):
        raise ValueError(f"{fn}: {name} must have shape ({cols},) to match the last axis of x, got {p.shape}")
    return np.ascontiguousarray(p, dtype=np.float32)


def _output(fn, out, x, params):
    if out is None:
        return np.empty(x.shape, x.dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{fn}: out must be a numpy.ndarray or None, got {type(out).__name__}")
    if out.dtype != x.dtype or out.shape != x.shape:
        raise ValueError(
            f"{fn}: out must have x's shape {x.shape} and dtype {x.dtype}, got {out.shape} {out.dtype}"
        )
    if not out.flags.writeable:
        raise ValueError(f"{fn}: out is read-only")
    for name, p in params:
        if p is not None and np.may_share_memory(out, p):
            raise ValueError(f"{fn}: out overlaps {name}")
    if not (out.flags.c_contiguous and x.flags.c_contiguous):
        return out  # strided: the library checks x against out exactly (rows may interleave in one buffer)
    # The kernels allow out to be x itself (in place) and nothing else that shares memory with an input.
    if np.may_share_memory(out, x) and out.__array_interface__["data"][0] != x.__array_interface__["data"][0]:
        raise ValueError(f"{fn}: out overlaps x without being x; pass out=x for in place, or a separate array")
    return out


def _forward(fn, op, rows, cols, code, scalars, x, weight, bias, y, stats):
    """Runs op on x into y: the plain call when both are C-contiguous, else the strided (_ex) call, with
    x copied first only if its rows cannot be addressed in place."""
    if x.flags.c_contiguous and y.flags.c_contiguous:
        return getattr(_C, op)(rows, cols, code, *scalars, x, weight, bias, y, *stats)
    x_strides, y_strides = _element_strides(x), _element_strides(y)
    if x_strides is None:
        x = np.ascontiguousarray(x)
        x_strides = _element_strides(x)
    inner_rows, x_layout, y_layout = (None, None, None) if y_strides is None else _layout.plan(
        x.shape, x_strides, y.shape, y_strides)
    if y_layout is None:
        raise ValueError(
            f"{fn}: out's rows must be addressable as at most two levels of strides in row order "
            f"(got shape {y.shape}, strides {y.strides}); pass a C-contiguous out or none"
        )
    if x_layout is None:
        x = np.ascontiguousarray(x)
        x_layout = _layout.layout(x.shape, _element_strides(x), inner_rows)
    strides = _layout.strides_argument(x_layout, y_layout)
    getattr(_C, op + "_ex")(rows, cols, code, *scalars, inner_rows, strides, _address(x), weight, bias,
                            _address(y), *stats)


def _operands(fn, x, weight, bias):
    """x checked, its dtype code and width, and the checked weight and bias (or None)."""
    x, code = _input(fn, x)
    cols = x.shape[-1]
    return x, code, cols, _param(fn, "weight", weight, cols), _param(fn, "bias", bias, cols)


def rms_norm(x, weight=None, eps=1e-6, partial=1.0, *, bias=None, weight_offset=0.0, out=None):
    """RMSNorm over the last axis: y = x / sqrt(mean(x[..., :k]**2) + eps) * (weight_offset + weight) (+ bias).

    partial < 1 is pRMSNorm: the mean square is taken over the first k = max(1, ceil(partial * n)) of the
    n elements (see rmsnorm.partial_size) and applied to all n. weight_offset is the Gemma-style gain
    offset, (1 + w) with weight_offset=1. out may be x itself for an in-place update.
    """
    fn = "rmsnorm.rms_norm"
    x, code, cols, weight, bias = _operands(fn, x, weight, bias)
    eps, partial, weight_offset = check_eps(fn, eps), check_partial(fn, partial), check_offset(fn, weight_offset)
    y = _output(fn, out, x, (("weight", weight), ("bias", bias)))
    _forward(fn, "rms_forward", x.size // cols, cols, code, (eps, partial, weight_offset), x, weight, bias, y, (None,))
    return y


def layer_norm(x, weight=None, bias=None, eps=1e-5, *, out=None):
    """LayerNorm over the last axis: y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias.

    The baseline RMSNorm is compared with; eps defaults to 1e-5 as in torch.nn.LayerNorm.
    """
    fn = "rmsnorm.layer_norm"
    x, code, cols, weight, bias = _operands(fn, x, weight, bias)
    eps = check_eps(fn, eps)
    y = _output(fn, out, x, (("weight", weight), ("bias", bias)))
    _forward(fn, "layer_forward", x.size // cols, cols, code, (eps, 1.0, 0.0), x, weight, bias, y, (None, None))
    return y


def l2_norm(x, weight=None, eps=1e-12, *, bias=None, out=None):
    """L2-Norm over the last axis: y = x / sqrt(sum(x**2) + eps) * weight (+ bias).

    The paper's other baseline: RMSNorm without the 1/n, so y = rms_norm(x) / sqrt(n) when eps is 0.
    """
    fn = "rmsnorm.l2_norm"
    x, code, cols, weight, bias = _operands(fn, x, weight, bias)
    eps = check_eps(fn, eps)
    y = _output(fn, out, x, (("weight", weight), ("bias", bias)))
    _forward(fn, "l2_forward", x.size // cols, cols, code, (eps, 1.0, 0.0), x, weight, bias, y, (None,))
    return y
