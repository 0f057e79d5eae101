"""Quantized outputs: rmsnorm.rms_norm_quantized (NumPy) and rmsnorm.torch.rms_norm_quantized /
add_rms_norm_quantized, every format x dtype x plain or fused add x packed or strided rows.

What is asserted:
- the C call's bytes (rmsnorm._C with packed buffers) are, bit for bit, a NumPy re-quantization written
  out here of the library's own f32 forward of the same rows (rmsnorm.rms_norm on x, or on h, in f32),
  with rmsnorm.h's formulas and f32 quotients y / scale; each value is within half a step of the exact
  quotient (or saturated), which checks the re-quantization itself;
- the NumPy and torch functions return exactly the C call's bytes, packed or strided, on both torch routes;
- strided inputs are read in place (the kernel gets the view's own address), or copied when their rows
  cannot be addressed;
- bad formats, a missing or non-finite static scale and q8_0 with cols % 32 != 0 raise the library's
  errors; torch.compile(fullgraph=True) traces the ops.
"""
import numpy as np
import pytest

import rmsnorm
from rmsnorm import _C

ml_dtypes = pytest.importorskip("ml_dtypes")
BF16 = np.dtype(ml_dtypes.bfloat16)

FORMATS = ["int8", "fp8_e4m3", "fp8_e4m3_static", "q8_0"]
DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16), "bf16": BF16}
STATIC_SCALE = 0.0075  # not a power of two; the largest |y| / scale go past 448 and saturate
ROWS_LEAD, COLS = (2, 3), 96  # 6 rows of 3 q8_0 blocks


# ---- A NumPy re-quantization ---------------------------------------------------------------------


def _e4m3_table():
    codes = np.arange(256)
    exponent, mantissa = (codes >> 3) & 0xF, codes & 7
    magnitude = np.where(exponent == 0, mantissa * 2.0**-9, (8 + mantissa) * 2.0 ** (exponent - 10.0))
    values = np.where(codes & 0x80, -magnitude, magnitude)
    values[(codes & 0x7F) == 0x7F] = np.nan
    return values


E4M3 = _e4m3_table()  # float64 value of each byte
E4M3_POSITIVE = E4M3[:0x7F]  # codes 0 .. 0x7E, increasing, 0 .. 448


def encode_e4m3(v, negative):
    """Nearest E4M3 byte to float64 v (ties to the even code), saturating at 448; sign bit given."""
    m = np.abs(v)
    above = np.minimum(np.searchsorted(E4M3_POSITIVE, m, side="left"), 0x7E)
    below = np.maximum(above - 1, 0)
    to_below, to_above = m - E4M3_POSITIVE[below], E4M3_POSITIVE[above] - m
    code = np.where(to_below < to_above, below, np.where(to_above < to_below, above, np.where(below % 2 == 0, below, above)))
    code = np.where(E4M3_POSITIVE[above] == m, above, code)
    code = np.where(m >= 448.0, 0x7E, code)
    return (code | np.where(negative, 0x80, 0)).astype(np.uint8)


def requantize(y, fmt):
    """y: (rows, n) float32 -> (q bytes (rows, width) uint8, scales (rows) float32 or None, quotients):
    the header's formulas with every quotient a float32 division. quotients: (exact float64, f32) y / scale
    per element."""
    y = y.astype(np.float32)
    rows, n = y.shape
    if fmt == "q8_0":
        blocks = y.reshape(rows, n // 32, 32)
        amax = np.abs(blocks).max(-1).astype(np.float64)
        d16 = (amax / 127.0).astype(np.float16)  # double -> half, rounded once to nearest even
        d = d16.astype(np.float32)[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            f32 = np.where(d == 0, 0, blocks / d)
            exact = np.where(d == 0, 0, blocks.astype(np.float64) / d.astype(np.float64))
        qs = np.clip(np.rint(f32), -127, 127).astype(np.int8)
        out = np.concatenate([d16[..., None].view(np.uint8).reshape(rows, n // 32, 2), qs.view(np.uint8)], -1)
        return out.reshape(rows, n // 32 * 34), None, (exact.reshape(rows, n), f32.reshape(rows, n))
    if fmt == "fp8_e4m3_static":
        scale = np.full((rows, 1), STATIC_SCALE, np.float32)
    else:
        scale = np.abs(y).max(-1, keepdims=True) / np.float32(127 if fmt == "int8" else 448)  # f32 division
    with np.errstate(divide="ignore", invalid="ignore"):
        f32 = np.where(scale == 0, np.float32(0), y / scale)
        exact = np.where(scale == 0, 0.0, y.astype(np.float64) / scale.astype(np.float64))
    if fmt == "int8":
        q = np.clip(np.rint(f32), -127, 127).astype(np.int8).view(np.uint8)
    else:
        q = np.where(scale == 0, np.uint8(0), encode_e4m3(f32.astype(np.float64), np.signbit(y)))
    scales = None if fmt == "fp8_e4m3_static" else scale[:, 0]
    return q, scales, (exact, f32)


def values_of(q, fmt, n):
    """The quantized values (rows, n) in units of the scale: int8 values, E4M3 values, q8_0's int8s."""
    if fmt == "q8_0":
        return q.reshape(q.shape[0], n // 32, 34)[..., 2:].copy().view(np.int8).reshape(q.shape[0], n).astype(np.float64)
    if fmt == "int8":
        return q.view(np.int8).astype(np.float64)
    return E4M3[q]


def half_step(fmt, v):
    """Half the distance between the format's values around |v| (in units of the scale)."""
    if fmt in ("int8", "q8_0"):
        return np.full(v.shape, 0.5)
    m = np.abs(v)
    with np.errstate(divide="ignore"):
        return np.where(m < 2.0**-6, 2.0**-10, np.exp2(np.floor(np.log2(np.maximum(m, 2.0**-6)))) / 16)


def assert_requantization(q, scales, y, fmt):
    """q and scales (the library's, packed) against requantize(y), bit for bit; and, as a check of the
    re-quantization itself, every value within half a step of the exact y / scale (or saturated)."""
    rows, n = y.shape
    want_q, want_scales, (exact, f32) = requantize(y, fmt)
    if want_scales is not None:
        np.testing.assert_array_equal(scales.view(np.uint32), want_scales.view(np.uint32))
    q = q.reshape(rows, -1).view(np.uint8)
    np.testing.assert_array_equal(q, want_q)
    got_v = values_of(q, fmt, n)
    limit = 127.0 if fmt in ("int8", "q8_0") else 448.0
    error = np.abs(got_v - np.clip(exact, -limit, limit))
    assert np.all(error <= half_step(fmt, exact) * (1 + 2.0**-20) + np.abs(exact) * 2.0**-23), fmt


# ---- Inputs and the C call -----------------------------------------------------------------------


def make_inputs(dtype, add, seed=0):
    rng = np.random.default_rng(seed)
    shape = ROWS_LEAD + (COLS,)
    x = (rng.standard_normal(shape) * 2).astype(DTYPES[dtype])
    x[0, 1] = 0  # a zero row: scale 0 without a bias
    residual = (rng.standard_normal(shape)).astype(DTYPES[dtype]) if add else None
    if add:
        residual[0, 1] = 0
    weight = rng.uniform(0.5, 1.5, COLS).astype(np.float32)
    return x, residual, weight


def strided_copy(a, seed):
    """a's values as a view with gaps: rows two levels apart, (lead0, lead1) inside a wider buffer."""
    rng = np.random.default_rng(seed)
    buf = rng.standard_normal((a.shape[0], a.shape[1] + 2, a.shape[2] + 8)).astype(a.dtype)
    view = buf[:, 1:1 + a.shape[1], 4:4 + a.shape[2]]
    view[...] = a
    assert not view.flags.c_contiguous
    return view


def f32_forward(rows_in, weight, eps):
    """The library's own f32 forward of the rows the quantized call normalizes."""
    return rmsnorm.rms_norm(rows_in.astype(np.float32).reshape(-1, COLS), weight, eps)


def c_call(fmt, x, residual, weight, eps):
    """rmsnorm_forward_quantized / rmsnorm_add_forward_quantized straight through the binding, packed."""
    code = rmsnorm._numpy.QUANT_FORMATS[fmt]
    _, unit_bytes, unit_cols, kind = _C.QUANT_FORMATS[code]
    rows = x.size // COLS
    dtype_code = rmsnorm._numpy._CODES.get(x.dtype) or rmsnorm._numpy._late_code(x.dtype)
    q = np.full((rows, COLS // unit_cols * unit_bytes), 0xA5, np.uint8)
    scales = {"per_row": np.full(rows, -1, np.float32), "static": np.array([STATIC_SCALE], np.float32),
              "in_blocks": None}[kind]
    args = (rows, COLS, dtype_code, eps, 1.0, 0.0, 0, (0,) * 12, code)
    if residual is None:
        _C.rms_forward_quantized(*args, np.ascontiguousarray(x), weight, None, q, scales, None)
        return q, scales, None
    h = np.empty(x.shape, x.dtype)
    _C.rms_add_forward_quantized(*args, np.ascontiguousarray(x), np.ascontiguousarray(residual), weight, None, q,
                                 scales, h, None)
    return q, scales, h


EPS = 1e-5


@pytest.mark.parametrize("add", [False, True], ids=["plain", "add"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_c_call_is_the_requantized_f32_forward(fmt, dtype, add):
    x, residual, weight = make_inputs(dtype, add)
    q, scales, h = c_call(fmt, x, residual, weight, EPS)
    if add:
        np.testing.assert_array_equal(h, (x.astype(np.float32) + residual.astype(np.float32)).astype(x.dtype))
    y = f32_forward(h if add else x, weight, EPS)
    assert_requantization(q, scales if fmt != "fp8_e4m3_static" else None, y, fmt)
    if fmt in ("int8", "fp8_e4m3") and not add:
        assert scales[1] == 0 and not q[1].any()  # the zero row


def _numpy_call(fmt, x, residual, weight):
    scale = STATIC_SCALE if fmt == "fp8_e4m3_static" else None
    return rmsnorm.rms_norm_quantized(x, weight, EPS, format=fmt, scale=scale, residual=residual)


@pytest.mark.parametrize("strided", [False, True], ids=["packed", "strided"])
@pytest.mark.parametrize("add", [False, True], ids=["plain", "add"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_numpy_returns_the_c_call_bytes(fmt, dtype, add, strided):
    x, residual, weight = make_inputs(dtype, add)
    want_q, want_scales, want_h = c_call(fmt, x, residual, weight, EPS)
    if strided:
        x = strided_copy(x, 1)
        residual = None if residual is None else strided_copy(residual, 2)
    out = _numpy_call(fmt, x, residual, weight)
    assert len(out) == (3 if add else 2)
    q, scales = out[:2]
    assert q.dtype == (np.int8 if fmt == "int8" else np.uint8)
    assert q.shape == ROWS_LEAD + ((COLS // 32 * 34,) if fmt == "q8_0" else (COLS,))
    np.testing.assert_array_equal(q.reshape(want_q.shape).view(np.uint8), want_q)
    if fmt == "q8_0":
        assert scales is None
    elif fmt == "fp8_e4m3_static":
        assert scales is STATIC_SCALE
    else:
        assert scales.dtype == np.float32 and scales.shape == ROWS_LEAD
        np.testing.assert_array_equal(scales.reshape(-1).view(np.uint32), want_scales.view(np.uint32))
    if add:
        h = out[2]
        assert h.dtype == x.dtype and h.shape == x.shape and h.flags.c_contiguous
        np.testing.assert_array_equal(h.view(np.uint8), want_h.view(np.uint8))


def test_dequantized_within_half_a_step(rng):
    # The documented use: q * scales[..., None] is y within half a step (int8: scale / 2).
    x = rng.standard_normal((4, 7, 64)).astype(np.float32)
    q, scales = rmsnorm.rms_norm_quantized(x)
    y = rmsnorm.rms_norm(x)
    assert np.all(np.abs(q * scales[..., None] - y) <= scales[..., None] * (0.5 + 1e-4))
    assert np.abs(q).max() == 127


def test_fp8_bytes_are_ml_dtypes_float8_e4m3fn(rng):
    x = rng.standard_normal((3, 40)).astype(np.float32)
    q, scales = rmsnorm.rms_norm_quantized(x, format="fp8_e4m3")
    decoded = q.view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    np.testing.assert_array_equal(decoded, E4M3[q])
    assert np.all(np.abs(decoded * scales[:, None] - rmsnorm.rms_norm(x)) <= 448 / 16 * scales[:, None])


def _spy(monkeypatch, name):
    calls = []
    real = getattr(_C, name)

    def spy(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(_C, name, spy)
    return calls


def _address(a):
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("add", [False, True], ids=["plain", "add"])
def test_numpy_strided_view_is_read_in_place(monkeypatch, add):
    # q's heads of a fused QKV buffer: the kernel gets the view's own address, nothing is copied.
    x, residual, weight = make_inputs("bf16", add)
    x, residual = strided_copy(x, 1), None if residual is None else strided_copy(residual, 2)
    calls = _spy(monkeypatch, "rms_add_forward_quantized" if add else "rms_forward_quantized")
    rmsnorm.rms_norm_quantized(x, weight, residual=residual)
    (args,) = calls
    inner_rows, strides = args[6], args[7]
    assert args[9] == _address(x) and inner_rows == ROWS_LEAD[1]
    assert strides[:2] == (x.strides[0] // 2, x.strides[1] // 2)
    if add:
        assert args[10] == _address(residual) and strides[2:4] == (residual.strides[0] // 2, residual.strides[1] // 2)


def test_numpy_rows_out_of_order_are_copied(monkeypatch):
    x, _, weight = make_inputs("f32", False)
    reversed_rows = x[::-1]
    calls = _spy(monkeypatch, "rms_forward_quantized")
    q, scales = rmsnorm.rms_norm_quantized(reversed_rows, weight)
    assert calls[0][9] != _address(reversed_rows)
    want_q, want_scales = rmsnorm.rms_norm_quantized(np.ascontiguousarray(reversed_rows), weight)
    np.testing.assert_array_equal(q, want_q)
    np.testing.assert_array_equal(scales, want_scales)


# ---- Bad input ----------------------------------------------------------------------------------


def test_numpy_bad_input():
    x = np.ones((2, 64), np.float32)
    with pytest.raises(ValueError, match="format must be one of 'int8', 'fp8_e4m3', 'fp8_e4m3_static', 'q8_0'"):
        rmsnorm.rms_norm_quantized(x, format="int4")
    with pytest.raises(TypeError, match="format must be a str"):
        rmsnorm.rms_norm_quantized(x, format=1)
    with pytest.raises(ValueError, match="needs scale"):
        rmsnorm.rms_norm_quantized(x, format="fp8_e4m3_static")
    with pytest.raises(ValueError, match="scale is only for format 'fp8_e4m3_static'"):
        rmsnorm.rms_norm_quantized(x, format="int8", scale=1.0)
    with pytest.raises(TypeError, match="scale must be a real number"):
        rmsnorm.rms_norm_quantized(x, format="fp8_e4m3_static", scale="1")
    # The library's own checks, its messages.
    with pytest.raises(ValueError, match=r"rmsnorm_forward_quantized: .*cols \(48\) must be a multiple of 32"):
        rmsnorm.rms_norm_quantized(np.ones((2, 48), np.float32), format="q8_0")
    with pytest.raises(ValueError, match=r"rmsnorm_add_forward_quantized: .*must be a multiple of 32"):
        rmsnorm.rms_norm_quantized(np.ones((2, 48), np.float32), format="q8_0", residual=np.ones((2, 48), np.float32))
    for bad in (float("nan"), float("inf"), 1e39, 0.0, -1.0):
        with pytest.raises(ValueError, match=r"static scale \*scales must be finite and > 0"):
            rmsnorm.rms_norm_quantized(x, format="fp8_e4m3_static", scale=bad)
    with pytest.raises(ValueError, match="residual must have x's shape"):
        rmsnorm.rms_norm_quantized(x, residual=np.ones((2, 64), np.float16))
    with pytest.raises(ValueError, match="eps"):
        rmsnorm.rms_norm_quantized(x, eps=-1.0)


def test_binding_checks_buffer_sizes():
    x = np.ones((2, 64), np.float32)
    args = (2, 64, _C.F32, 1e-6, 1.0, 0.0, 0, (0,) * 12, rmsnorm._numpy.QUANT_FORMATS["int8"], x, None, None)
    with pytest.raises(ValueError, match="q holds 127 bytes"):
        _C.rms_forward_quantized(*args, np.empty(127, np.int8), np.empty(2, np.float32), None)
    with pytest.raises(ValueError, match="scales holds 4 bytes"):
        _C.rms_forward_quantized(*args, np.empty(128, np.int8), np.empty(1, np.float32), None)
    with pytest.raises(ValueError, match="format is not an rmsnorm_quant_format"):
        _C.rms_forward_quantized(*args[:8], 9, x, None, None, np.empty(128, np.int8), None, None)


# ---- torch --------------------------------------------------------------------------------------

torch = pytest.importorskip("torch")
import rmsnorm.torch as rt  # noqa: E402

TORCH_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
Q_DTYPES = {"int8": torch.int8, "fp8_e4m3": torch.float8_e4m3fn, "fp8_e4m3_static": torch.float8_e4m3fn,
            "q8_0": torch.uint8}


def to_torch(a):
    if a.dtype == BF16:
        return torch.from_numpy(a.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(a.copy())


def bytes_of(t):
    return t.contiguous().view(torch.uint8).numpy() if t.dtype != torch.uint8 else t.contiguous().numpy()


def strided_tensor(t, seed):
    g = torch.Generator().manual_seed(seed)
    buf = torch.randn((t.shape[0], t.shape[1] + 2, t.shape[2] + 8), generator=g).to(t.dtype)
    view = buf[:, 1:1 + t.shape[1], 4:4 + t.shape[2]]
    view.copy_(t)
    assert not view.is_contiguous()
    return view


def _torch_call(fmt, x, residual, weight):
    scale = STATIC_SCALE if fmt == "fp8_e4m3_static" else None
    if residual is None:
        return rt.rms_norm_quantized(x, COLS, weight, EPS, format=fmt, scale=scale)
    return rt.add_rms_norm_quantized(x, residual, weight, EPS, format=fmt, scale=scale)


@pytest.mark.parametrize("strided", [False, True], ids=["packed", "strided"])
@pytest.mark.parametrize("add", [False, True], ids=["plain", "add"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_torch_returns_the_c_call_bytes(route, fmt, dtype, add, strided):
    x_np, residual_np, weight_np = make_inputs(dtype, add)
    want_q, want_scales, want_h = c_call(fmt, x_np, residual_np, weight_np, EPS)
    x, weight = to_torch(x_np), torch.from_numpy(weight_np).requires_grad_()  # a Parameter-like weight
    residual = None if residual_np is None else to_torch(residual_np)
    if strided:
        x = strided_tensor(x, 1)
        residual = None if residual is None else strided_tensor(residual, 2)
    with torch.no_grad():
        out = _torch_call(fmt, x, residual, weight)
    assert len(out) == (3 if add else 2)
    q, scales = out[:2]
    assert q.dtype == Q_DTYPES[fmt] and not q.requires_grad
    assert tuple(q.shape) == ROWS_LEAD + ((COLS // 32 * 34,) if fmt == "q8_0" else (COLS,))
    np.testing.assert_array_equal(bytes_of(q).reshape(want_q.shape), want_q)
    if fmt == "q8_0":
        assert scales is None
    elif fmt == "fp8_e4m3_static":
        assert scales is STATIC_SCALE
    else:
        assert scales.dtype == torch.float32 and tuple(scales.shape) == ROWS_LEAD
        np.testing.assert_array_equal(scales.reshape(-1).numpy().view(np.uint32), want_scales.view(np.uint32))
    if add:
        h = out[2]
        assert h.dtype == TORCH_DTYPES[dtype] and h.shape == x.shape
        np.testing.assert_array_equal(bytes_of(h).reshape(-1), want_h.view(np.uint8).reshape(-1))
        # h is add_rms_norm's h
        np.testing.assert_array_equal(bytes_of(h), bytes_of(rt.add_rms_norm(x.detach(), residual, weight.detach())[1]))


def test_torch_fp8_dequantizes_like_torch(torch_seed):
    x = torch.randn(5, 64)
    with torch.inference_mode():
        q, scales = rt.rms_norm_quantized(x, 64, format="fp8_e4m3")
        y = rt.rms_norm(x, 64)
    # torch's own float8_e4m3fn decoding of our bytes
    assert torch.all((q.float() * scales[:, None] - y).abs() <= scales[:, None] * 448 / 16)
    np.testing.assert_array_equal(q.float().numpy(), E4M3[bytes_of(q)].astype(np.float32))


def test_torch_static_scale_as_a_tensor():
    x = torch.randn(3, 64)
    s = torch.tensor([0.01])
    with torch.no_grad():
        q, scales = rt.rms_norm_quantized(x, 64, format="fp8_e4m3_static", scale=s)
        q2, _ = rt.rms_norm_quantized(x, 64, format="fp8_e4m3_static", scale=float(s))
    assert scales is s
    assert torch.equal(q.view(torch.uint8), q2.view(torch.uint8))


@pytest.mark.parametrize("add", [False, True], ids=["plain", "add"])
def test_torch_strided_view_is_read_in_place(monkeypatch, add):
    x_np, residual_np, weight_np = make_inputs("f16", add)
    x = strided_tensor(to_torch(x_np), 1)
    residual = None if residual_np is None else strided_tensor(to_torch(residual_np), 2)
    calls = _spy(monkeypatch, "rms_add_forward_quantized" if add else "rms_forward_quantized")
    with torch.no_grad():
        _torch_call("int8", x, residual, torch.from_numpy(weight_np))
    (args,) = calls
    assert args[9] == x.data_ptr() and args[6] == ROWS_LEAD[1] and args[7][:2] == x.stride()[:2]
    if add:
        assert args[10] == residual.data_ptr() and args[7][2:4] == residual.stride()[:2]


def test_torch_bad_input():
    x = torch.ones(2, 64)
    with pytest.raises(ValueError, match="format must be one of"):
        rt.rms_norm_quantized(x, 64, format="int4")
    with pytest.raises(ValueError, match="needs scale"):
        rt.add_rms_norm_quantized(x, x.clone(), format="fp8_e4m3_static")
    with pytest.raises(ValueError, match="must be a multiple of 32"):
        rt.rms_norm_quantized(torch.ones(2, 48), 48, format="q8_0")
    with pytest.raises(ValueError, match="must be a multiple of 32"):
        rt.add_rms_norm_quantized(torch.ones(2, 48), torch.ones(2, 48), format="q8_0")
    for bad in (float("nan"), float("inf"), 0.0, torch.tensor([float("nan")])):
        with pytest.raises(ValueError, match=r"static scale \*scales must be finite and > 0"):
            rt.rms_norm_quantized(x, 64, format="fp8_e4m3_static", scale=bad)
    with pytest.raises(ValueError, match="one floating-point value"):
        rt.rms_norm_quantized(x, 64, format="fp8_e4m3_static", scale=torch.ones(2))
    with pytest.raises(TypeError, match="input has dtype"):
        rt.rms_norm_quantized(x.double(), 64)
    # Inference only: with grad mode on, an argument that requires grad is refused.
    with pytest.raises(RuntimeError, match="does not support automatic differentiation"):
        rt.rms_norm_quantized(x.requires_grad_(), 64)
    with pytest.raises(RuntimeError, match="does not support automatic differentiation"):
        rt.add_rms_norm_quantized(torch.ones(2, 64), torch.ones(2, 64), torch.ones(64, requires_grad=True))


def test_torch_normalized_shape_of_two_dims():
    x = torch.randn(3, 2, 64)
    with torch.no_grad():
        q, scales = rt.rms_norm_quantized(x, (2, 64), format="int8")
        q1, scales1 = rt.rms_norm_quantized(x.reshape(3, 128), 128, format="int8")
    assert q.shape == x.shape and scales.shape == (3,)
    assert torch.equal(q.reshape(3, 128), q1) and torch.equal(scales, scales1)


@pytest.mark.parametrize("fmt", FORMATS)
def test_torch_compile_fullgraph(fmt):
    torch._dynamo.reset()
    scale = STATIC_SCALE if fmt == "fp8_e4m3_static" else None

    def block(x, residual, weight):
        q1, s1 = rt.rms_norm_quantized(x, 64, weight, format=fmt, scale=scale)
        q2, s2, h = rt.add_rms_norm_quantized(x, residual, weight, format=fmt, scale=scale)
        return q1, s1, q2, s2, h

    x, residual, weight = torch.randn(4, 64), torch.randn(4, 64), torch.rand(64) + 0.5
    with torch.no_grad():
        explanation = torch._dynamo.explain(block)(x, residual, weight)
        assert explanation.graph_break_count == 0
        code = "\n".join(g.code for g in explanation.graphs)
        assert "rmsnorm.rms_norm_quantized" in code and "rmsnorm.add_rms_norm_quantized" in code
        torch._dynamo.reset()
        got = torch.compile(block, fullgraph=True, backend="aot_eager")(x, residual, weight)
        want = block(x, residual, weight)
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            assert g.dtype == w.dtype and torch.equal(g.view(torch.uint8) if g.dtype == torch.float8_e4m3fn else g,
                                                       w.view(torch.uint8) if w.dtype == torch.float8_e4m3fn else w)
        else:
            assert g == w
    torch._dynamo.reset()


def test_the_e4m3_encoder_here_rounds_as_ml_dtypes():
    # The oracle's own check: below 448 (where ml_dtypes does not saturate) its nearest-even encoding is
    # ml_dtypes' float8_e4m3fn conversion, on random values and on every midpoint between neighbours.
    rng = np.random.default_rng(5)
    midpoints = (E4M3_POSITIVE[1:] + E4M3_POSITIVE[:-1]) / 2
    v = np.concatenate([rng.standard_normal(4000) * 50, midpoints, -midpoints, E4M3_POSITIVE])
    v = v[np.abs(v) < 448]
    got = encode_e4m3(v, np.signbit(v))
    want = v.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    np.testing.assert_array_equal(got, want)
    assert encode_e4m3(np.array([500.0, 1e9]), np.array([False, True])).tolist() == [0x7E, 0xFE]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("op", ["rms_norm_quantized", "add_rms_norm_quantized"])
def test_opcheck(op, fmt):
    # Schema, fake implementation (shapes, dtypes) and AOT dispatch, as torch checks custom ops; the
    # meta device gives the shapes too.
    code = rmsnorm._numpy.QUANT_FORMATS[fmt]
    scale = torch.tensor([STATIC_SCALE]) if fmt == "fp8_e4m3_static" else None
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    inputs = (x,) if op == "rms_norm_quantized" else (x, torch.randn(3, 64, dtype=torch.bfloat16))
    torch.library.opcheck(getattr(torch.ops.rmsnorm, op).default,
                          (*inputs, torch.rand(64) + 0.5, None, 1e-6, 0.5, 0.0, code, scale))
    with torch.no_grad():
        q, scales = rt.rms_norm_quantized(torch.empty(2, 3, 64, device="meta"), 64, format=fmt,
                                          scale=None if scale is None else STATIC_SCALE)
    assert q.device.type == "meta" and q.dtype == Q_DTYPES[fmt]
    assert q.shape == ((2, 3, 68) if fmt == "q8_0" else (2, 3, 64))


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_rows_and_one_row(fmt):
    scale = STATIC_SCALE if fmt == "fp8_e4m3_static" else None
    width = 68 if fmt == "q8_0" else 64
    q, scales = rmsnorm.rms_norm_quantized(np.zeros((0, 64), np.float32), format=fmt, scale=scale)
    assert q.shape == (0, width) and (scales is None or scales is scale or scales.shape == (0,))
    with torch.no_grad():
        q, scales = rt.rms_norm_quantized(torch.zeros(0, 64), 64, format=fmt, scale=scale)
    assert q.shape == (0, width) and (scales is None or scales is scale or scales.shape == (0,))
    # A 1-D x is one row: q (n) or (n // 32 * 34), a 0-d scale
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    q, scales = rmsnorm.rms_norm_quantized(x, format=fmt, scale=scale)
    want_q, want_scales = rmsnorm.rms_norm_quantized(x[None], format=fmt, scale=scale)
    assert q.shape == (width,)
    np.testing.assert_array_equal(q, want_q[0])
    if fmt in ("int8", "fp8_e4m3"):
        assert scales.shape == () and scales == want_scales[0]
