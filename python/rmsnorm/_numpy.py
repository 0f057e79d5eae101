"""The NumPy front end: each function normalizes the last axis of an array of any leading shape.

x may be float32, float16, or bfloat16 as NumPy holds it through ml_dtypes; the output has x's dtype.
weight and bias may be any of those dtypes or float64 and are used as float32, which is what the kernels
take (the statistics and the arithmetic are f32 or wider whatever the storage).
"""
import numbers

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


# ---- Quantized outputs ---------------------------------------------------------------------------

# The formats by the names the Python functions take (NumPy and torch alike), as C codes from the
# registry's list (rmsnorm._C.QUANT_FORMATS: code -> (C name, unit_bytes, unit_cols, scales kind)).
_C_NAMES = {"int8": "RMSNORM_QUANT_INT8_ROW", "fp8_e4m3": "RMSNORM_QUANT_FP8_E4M3_ROW",
            "fp8_e4m3_static": "RMSNORM_QUANT_FP8_E4M3_STATIC", "q8_0": "RMSNORM_QUANT_Q8_0"}
_BY_C_NAME = {info[0]: code for code, info in _C.QUANT_FORMATS.items()}
QUANT_FORMATS = {name: _BY_C_NAME[c_name] for name, c_name in _C_NAMES.items()}


def quant_format(fn, format, scale):
    """The format's C code and its _C.QUANT_FORMATS entry (C name, unit_bytes, unit_cols, scales kind),
    with scale checked to be given exactly for the static format (its value is checked later: the
    library refuses one that is not finite and > 0)."""
    if not isinstance(format, str):
        raise TypeError(f"{fn}: format must be a str, got {type(format).__name__}")
    code = QUANT_FORMATS.get(format)
    if code is None:
        raise ValueError(f"{fn}: format must be one of {', '.join(map(repr, QUANT_FORMATS))}, got {format!r}")
    info = _C.QUANT_FORMATS[code]
    if info[3] == "static":
        if scale is None:
            raise ValueError(f"{fn}: format {format!r} needs scale=, the per-tensor scale of q = e4m3(y / scale)")
    elif scale is not None:
        raise ValueError(f"{fn}: scale is only for format 'fp8_e4m3_static'; {format!r} computes its own scales")
    return code, info


def _static_scale(fn, scale):
    if isinstance(scale, np.ndarray) and scale.size == 1 and scale.dtype.kind == "f":
        value = scale.reshape(()).item()
    elif isinstance(scale, bool) or not isinstance(scale, numbers.Real):
        raise TypeError(f"{fn}: scale must be a real number, got {type(scale).__name__}")
    else:
        value = float(scale)
    with np.errstate(over="ignore"):
        return np.array([value], np.float32)  # beyond the f32 range: inf, which the library refuses


def rms_norm_quantized(x, weight=None, eps=1e-6, partial=1.0, *, format="int8", scale=None, residual=None,
                       bias=None, weight_offset=0.0):
    """RMSNorm (or pRMSNorm) over the last axis with the result quantized, in one pass: returns
    (q, scales), or (q, scales, h) with residual, where h = x + residual rounded to x's dtype (the fused
    add of a pre-norm block) is what is normalized and q quantizes the f32 y before any rounding.

    format, with q's dtype and shape for x of shape (*, n), and scales:
      "int8"             q int8 (*, n), scales float32 (*): max|y| / 127 per row, q = rint(y / scale)
      "fp8_e4m3"         q uint8 (*, n) holding OCP float8_e4m3fn bits (saturating at +-448), scales
                         float32 (*): max|y| / 448 per row. With ml_dtypes, q.view(ml_dtypes.float8_e4m3fn)
      "fp8_e4m3_static"  as fp8_e4m3 with the caller's per-tensor scale (a finite float > 0, required),
                         q = e4m3(y / scale); scales is the scale argument as given
      "q8_0"             q uint8 (*, n // 32 * 34): ggml's block_q8_0 bytes (f16 d, then 32 int8), as
                         gguf-py's quantize writes them; n must be a multiple of 32; scales is None
    y = q * scales[..., None] within half a step. The other arguments are rms_norm's; residual has x's
    shape and dtype. x and residual are read in place when their rows are evenly spaced (a slice, or
    heads inside a QKV buffer), else copied first.
    """
    fn = "rmsnorm.rms_norm_quantized"
    x, code, cols, weight, bias = _operands(fn, x, weight, bias)
    eps, partial, weight_offset = check_eps(fn, eps), check_partial(fn, partial), check_offset(fn, weight_offset)
    format_code, (_, unit_bytes, unit_cols, scales_kind) = quant_format(fn, format, scale)
    if residual is not None:
        if not isinstance(residual, np.ndarray):
            raise TypeError(f"{fn}: residual must be a numpy.ndarray or None, got {type(residual).__name__}")
        if residual.dtype != x.dtype or residual.shape != x.shape:
            raise ValueError(f"{fn}: residual must have x's shape {x.shape} and dtype {x.dtype}, got "
                             f"{residual.shape} {residual.dtype}")
    lead, rows = x.shape[:-1], x.size // cols
    q_dtype = np.int8 if format == "int8" else np.uint8
    q = np.empty(lead + ((cols // unit_cols) * unit_bytes,), q_dtype)
    if scales_kind == "per_row":
        scales = np.empty(lead, np.float32)
        scales_arg = scales
    elif scales_kind == "static":
        scales, scales_arg = scale, _static_scale(fn, scale)
    else:
        scales = scales_arg = None
    h = None if residual is None else np.empty(x.shape, x.dtype)
    scalars = (eps, partial, weight_offset)
    inputs = (x,) if residual is None else (x, residual)
    if all(a.flags.c_contiguous for a in inputs):
        # Packed rows: buffers, whose sizes the binding checks.
        if residual is None:
            _C.rms_forward_quantized(rows, cols, code, *scalars, 0, (0,) * 12, format_code, x, weight, bias, q,
                                     scales_arg, None)
        else:
            _C.rms_add_forward_quantized(rows, cols, code, *scalars, 0, (0,) * 12, format_code, x, residual, weight,
                                         bias, q, scales_arg, h, None)
    else:
        # Strided rows: addresses, with one row split (inner_rows) for every tensor. The outputs are
        # packed, so any split of the rows suits them; an input whose rows fit no common split is copied.
        inner_rows, layouts = _layout.plan_reads([(a.shape, _element_strides(a)) for a in inputs])
        inputs = list(inputs)
        for i, a in enumerate(inputs):
            if layouts[i] is None:
                inputs[i] = a = np.ascontiguousarray(a)
                layouts[i] = _layout.layout(a.shape, _element_strides(a), inner_rows)
        packed = (0, 0)
        if residual is None:
            strides = _layout.strides_argument(layouts[0], packed)
            _C.rms_forward_quantized(rows, cols, code, *scalars, inner_rows, strides, format_code, _address(inputs[0]),
                                     weight, bias, _address(q), scales_arg, None)
        else:
            strides = _layout.strides_argument(layouts[0], packed, layouts[1], packed)
            _C.rms_add_forward_quantized(rows, cols, code, *scalars, inner_rows, strides, format_code,
                                         _address(inputs[0]), _address(inputs[1]), weight, bias, _address(q),
                                         scales_arg, _address(h), None)
    return (q, scales) if residual is None else (q, scales, h)
