"""The NumPy front end against float64 formulas written out here (not against the library itself)."""
import math

import numpy as np
import pytest

import rmsnorm

try:
    import ml_dtypes

    BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bf16 cases are skipped without ml_dtypes
    BF16 = None

DTYPES = [np.float32, np.float16, pytest.param("bf16", marks=pytest.mark.skipif(BF16 is None, reason="ml_dtypes"))]
# Storage rounding of the output dominates the error: a few units in the last place of the dtype.
TOL = {np.dtype(np.float32): 2e-6, np.dtype(np.float16): 2e-3, "bf16": 1.6e-2}


def as_dtype(a, dtype):
    return a.astype(BF16 if dtype == "bf16" else dtype)


def tol(dtype):
    return TOL["bf16" if dtype == "bf16" else np.dtype(dtype)]


def rms_ref(x, w=None, b=None, eps=1e-6, partial=1.0, offset=0.0):
    x = x.astype(np.float64)
    n = x.shape[-1]
    k = max(1, math.ceil(partial * n))
    ms = (x[..., :k] ** 2).mean(-1, keepdims=True)
    g = 1.0 if w is None else offset + w.astype(np.float64)
    return x / np.sqrt(ms + eps) * g + (0.0 if b is None else b.astype(np.float64))


def ln_ref(x, w=None, b=None, eps=1e-5):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + eps)
    return y * (1.0 if w is None else w.astype(np.float64)) + (0.0 if b is None else b.astype(np.float64))


def l2_ref(x, w=None, b=None, eps=1e-12):
    x = x.astype(np.float64)
    y = x / np.sqrt((x**2).sum(-1, keepdims=True) + eps)
    return y * (1.0 if w is None else w.astype(np.float64)) + (0.0 if b is None else b.astype(np.float64))


def close(y, ref, dtype):
    assert y.shape == ref.shape
    if y.size == 0:
        return
    y = y.astype(np.float64)
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(y - ref).max())
    assert err <= tol(dtype) * scale, f"max |diff| {err:.3g} > {tol(dtype) * scale:.3g}"


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (3, 33), (2, 3, 64), (5, 1), (0, 16)])
def test_rms_norm_matches_formula(rng, dtype, shape):
    x = as_dtype(rng.standard_normal(shape) * 3, dtype)
    w = rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32)
    b = rng.standard_normal(shape[-1]).astype(np.float32)
    y = rmsnorm.rms_norm(x, w, eps=1e-5, bias=b)
    assert y.dtype == x.dtype and y.shape == x.shape
    close(y, rms_ref(x, w, b, eps=1e-5), dtype)
    close(rmsnorm.rms_norm(x), rms_ref(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layer_norm_and_l2_norm_match_formula(rng, dtype):
    x = as_dtype(rng.standard_normal((4, 5, 48)) + 2.0, dtype)
    w = rng.uniform(0.5, 1.5, 48).astype(np.float32)
    b = rng.standard_normal(48).astype(np.float32)
    close(rmsnorm.layer_norm(x, w, b), ln_ref(x, w, b), dtype)
    close(rmsnorm.layer_norm(x), ln_ref(x), dtype)
    close(rmsnorm.l2_norm(x, w, bias=b), l2_ref(x, w, b), dtype)
    close(rmsnorm.l2_norm(x, eps=0.0), l2_ref(x, eps=0.0), dtype)


@pytest.mark.parametrize("partial, n", [(0.0625, 100), (0.125, 64), (0.3, 37), (0.5, 3), (0.01, 10), (1.0, 17)])
def test_prmsnorm_uses_k_equal_ceil_p_n(rng, partial, n):
    k = math.ceil(partial * n)  # Python floats, the paper's definition
    assert rmsnorm.partial_size(n, partial) == max(1, k)
    x = rng.standard_normal((6, n)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, n).astype(np.float32)
    y = rmsnorm.rms_norm(x, w, eps=1e-6, partial=partial)
    close(y, rms_ref(x, w, eps=1e-6, partial=partial), np.float32)
    # Only the first k elements decide the scale: changing the rest changes only themselves.
    x2 = x.copy()
    x2[:, k:] *= 10.0
    y2 = rmsnorm.rms_norm(x2, w, eps=1e-6, partial=partial)
    np.testing.assert_array_equal(y2[:, :k], y[:, :k])


def test_partial_one_is_rmsnorm_bit_for_bit(rng):
    x = rng.standard_normal((9, 130)).astype(np.float32)
    np.testing.assert_array_equal(rmsnorm.rms_norm(x, partial=1.0), rmsnorm.rms_norm(x))
    assert rmsnorm.rms_norm(x, partial=0.99).tobytes() != rmsnorm.rms_norm(x).tobytes()


def test_partial_size_sweep_and_rounding_rule():
    for n in (1, 2, 3, 10, 64, 100, 4096):
        for p in (0.01, 0.0625, 0.1, 0.25, 1 / 3, 0.5, 0.7, 1.0):
            exact = p * n
            if abs(exact - round(exact)) < 1e-5 and round(exact) != exact:
                continue  # products that only rounding puts off an integer have their own test below
            assert rmsnorm.partial_size(n, p) == max(1, math.ceil(exact)), (n, p)
    # 0.1 * 10 is 1.0000000000000002 in doubles, but counts as 1, as the header documents.
    assert rmsnorm.partial_size(10, 0.1) == 1
    assert rmsnorm.partial_size(3, 1e-9) == 1  # k is never 0


def test_weight_offset_is_added_to_the_gain(rng):
    x = rng.standard_normal((4, 32)).astype(np.float32)
    w = rng.standard_normal(32).astype(np.float32) * 0.1
    close(rmsnorm.rms_norm(x, w, weight_offset=1.0), rms_ref(x, w, offset=1.0), np.float32)
    close(rmsnorm.rms_norm(x, w, weight_offset=1.0), rms_ref(x, 1.0 + w), np.float32)


def test_weight_dtypes_are_used_as_float32(rng):
    x = rng.standard_normal((3, 16)).astype(np.float32)
    w64 = rng.uniform(0.5, 1.5, 16)
    w32 = w64.astype(np.float32)
    np.testing.assert_array_equal(rmsnorm.rms_norm(x, w64), rmsnorm.rms_norm(x, w32))
    np.testing.assert_array_equal(rmsnorm.rms_norm(x, w32.astype(np.float16)),
                                  rmsnorm.rms_norm(x, w32.astype(np.float16).astype(np.float32)))


def test_non_contiguous_input_is_copied_not_misread(rng):
    base = rng.standard_normal((16, 64)).astype(np.float32)
    x = base[::2, ::2]  # strided in both axes
    close(rmsnorm.rms_norm(x), rms_ref(x), np.float32)
    xt = base.T  # Fortran order
    close(rmsnorm.layer_norm(xt), ln_ref(xt), np.float32)


def test_qk_norm_on_a_view_of_a_qkv_buffer_runs_in_place(rng):
    # QK-norm: q's heads are a (tokens, heads, head_dim) view into qkv[tokens][(Hq + 2 Hkv) * D], not
    # contiguous; out=q writes through the view, so nothing was copied, and k and v stay as they were.
    tokens, hq, hkv, d = 5, 4, 2, 32
    qkv = rng.standard_normal((tokens, (hq + 2 * hkv) * d)).astype(np.float32)
    before = qkv.copy()
    heads = qkv.reshape(tokens, hq + 2 * hkv, d)
    q = heads[:, :hq]
    assert not q.flags.c_contiguous and np.shares_memory(q, qkv)
    w = rng.uniform(0.5, 1.5, d).astype(np.float32)
    want = rmsnorm.rms_norm(np.ascontiguousarray(q), w)
    assert rmsnorm.rms_norm(q, w, out=q) is q
    np.testing.assert_array_equal(heads[:, :hq], want)
    np.testing.assert_array_equal(qkv[:, hq * d:], before[:, hq * d:])
    # Without out=, a strided x gives a new contiguous array with the same bits.
    k = before.reshape(tokens, hq + 2 * hkv, d)[:, hq:hq + hkv]
    np.testing.assert_array_equal(rmsnorm.layer_norm(k), rmsnorm.layer_norm(np.ascontiguousarray(k)))
    np.testing.assert_array_equal(rmsnorm.l2_norm(k), rmsnorm.l2_norm(np.ascontiguousarray(k)))


def test_strided_rows_interleaved_in_one_buffer(rng):
    # x and out are alternate column blocks of one array: their rows interleave without sharing an
    # element, which the library's exact overlap check accepts; shifted by one element they overlap.
    buf = rng.standard_normal((6, 64)).astype(np.float32)
    x, out = buf[:, :32], buf[:, 32:]
    want = rmsnorm.rms_norm(np.ascontiguousarray(x))
    rmsnorm.rms_norm(x, out=out)
    np.testing.assert_array_equal(out, want)
    with pytest.raises(ValueError, match="overlap"):
        rmsnorm.rms_norm(buf[:, :32], out=buf[:, 31:63])
    # Rows in reverse order cannot be addressed in place: x is copied, the result is the same.
    np.testing.assert_array_equal(rmsnorm.rms_norm(buf[::-1, :32]), rmsnorm.rms_norm(np.ascontiguousarray(buf[::-1, :32])))


def test_out_in_place_and_preallocated(rng):
    x = rng.standard_normal((5, 40)).astype(np.float32)
    expect = rmsnorm.rms_norm(x)
    out = np.empty_like(x)
    assert rmsnorm.rms_norm(x, out=out) is out
    np.testing.assert_array_equal(out, expect)
    x_in_place = x.copy()
    rmsnorm.rms_norm(x_in_place, out=x_in_place)
    np.testing.assert_array_equal(x_in_place, expect)


def test_out_is_checked(rng):
    x = rng.standard_normal((4, 8)).astype(np.float32)
    with pytest.raises(ValueError, match="shape"):
        rmsnorm.rms_norm(x, out=np.empty((4, 9), np.float32))
    with pytest.raises(ValueError, match="dtype"):
        rmsnorm.rms_norm(x, out=np.empty((4, 8), np.float16))
    with pytest.raises(ValueError, match="C-contiguous"):
        rmsnorm.rms_norm(x, out=np.empty((8, 4), np.float32).T)
    ro = np.empty_like(x)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        rmsnorm.rms_norm(x, out=ro)
    big = np.zeros(40, np.float32)
    x_view = big[:32].reshape(4, 8)
    with pytest.raises(ValueError, match="overlaps x"):
        rmsnorm.rms_norm(x_view, out=big[8:40].reshape(4, 8))
    w = np.ones(8, np.float32)
    with pytest.raises(ValueError, match="overlaps weight"):
        rmsnorm.layer_norm(np.ones((1, 8), np.float32), w, out=w.reshape(1, 8))
    with pytest.raises(TypeError):
        rmsnorm.rms_norm(x, out=[0.0] * 32)


def test_bad_arguments_raise_clear_errors(rng):
    x = rng.standard_normal((2, 8)).astype(np.float32)
    with pytest.raises(TypeError, match="float64"):
        rmsnorm.rms_norm(x.astype(np.float64))
    with pytest.raises(TypeError, match="int32"):
        rmsnorm.layer_norm(x.astype(np.int32))
    with pytest.raises(TypeError, match="ndarray"):
        rmsnorm.rms_norm(x.tolist())
    with pytest.raises(ValueError, match="0-d"):
        rmsnorm.rms_norm(np.array(1.0, np.float32))
    with pytest.raises(ValueError, match="empty"):
        rmsnorm.rms_norm(np.zeros((3, 0), np.float32))
    with pytest.raises(ValueError, match=r"shape \(8,\)"):
        rmsnorm.rms_norm(x, np.ones(7, np.float32))
    with pytest.raises(ValueError, match="bias"):
        rmsnorm.layer_norm(x, None, np.ones((2, 8), np.float32))
    with pytest.raises(TypeError, match="weight"):
        rmsnorm.rms_norm(x, np.ones(8, np.int64))
    with pytest.raises(TypeError, match="weight"):
        rmsnorm.rms_norm(x, [1.0] * 8)
    for eps in (-1e-6, float("nan"), float("inf"), 1e39):
        with pytest.raises(ValueError, match="eps"):
            rmsnorm.rms_norm(x, eps=eps)
    with pytest.raises(TypeError, match="eps"):
        rmsnorm.rms_norm(x, eps="1e-6")
    with pytest.raises(TypeError, match="eps"):
        rmsnorm.rms_norm(x, eps=True)
    for p in (0.0, -0.5, 1.5, float("nan")):
        with pytest.raises(ValueError, match="partial"):
            rmsnorm.rms_norm(x, partial=p)
    with pytest.raises(ValueError, match="weight_offset"):
        rmsnorm.rms_norm(x, np.ones(8, np.float32), weight_offset=float("inf"))


def test_zero_rows_and_extreme_magnitudes(rng):
    x = np.zeros((3, 16), np.float32)
    np.testing.assert_array_equal(rmsnorm.rms_norm(x, eps=0.0), x)  # 0, never NaN
    big = (rng.standard_normal((2, 64)) * 1e30).astype(np.float32)
    close(rmsnorm.rms_norm(big, eps=0.0), rms_ref(big, eps=0.0), np.float32)
    tiny = (rng.standard_normal((2, 64)) * 1e-30).astype(np.float32)
    close(rmsnorm.rms_norm(tiny, eps=0.0), rms_ref(tiny, eps=0.0), np.float32)


def test_paper_invariances(rng):
    x = rng.standard_normal((4, 64)).astype(np.float32)
    y = rmsnorm.rms_norm(x, eps=0.0)
    np.testing.assert_allclose(rmsnorm.rms_norm(x * np.float32(7.5), eps=0.0), y, rtol=1e-5, atol=1e-6)
    # Re-centering changes RMSNorm measurably, LayerNorm not at all (up to rounding).
    assert np.abs(rmsnorm.rms_norm(x + 3.0, eps=0.0) - y).max() > 0.1
    np.testing.assert_allclose(rmsnorm.layer_norm(x + 3.0, eps=0.0), rmsnorm.layer_norm(x, eps=0.0), atol=1e-5)
    # L2-Norm is RMSNorm scaled by 1/sqrt(n).
    np.testing.assert_allclose(rmsnorm.l2_norm(x, eps=0.0), y / np.sqrt(64), rtol=1e-5, atol=1e-7)


def test_threads_do_not_change_results(rng):
    x = rng.standard_normal((512, 1024)).astype(np.float32)
    rmsnorm.set_num_threads(1)
    assert rmsnorm.get_num_threads() == 1
    one = rmsnorm.rms_norm(x)
    rmsnorm.set_num_threads(2)
    assert rmsnorm.get_num_threads() == 2
    np.testing.assert_array_equal(rmsnorm.rms_norm(x), one)
    rmsnorm.set_num_threads(0)
    assert rmsnorm.get_num_threads() >= 1
    with pytest.raises(ValueError):
        rmsnorm.set_num_threads(-1)
    with pytest.raises(TypeError):
        rmsnorm.set_num_threads(1.5)


def test_reference_backend_agrees(rng):
    x = rng.standard_normal((8, 300)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 300).astype(np.float32)
    fast = rmsnorm.rms_norm(x, w, partial=0.25)
    with rmsnorm.use_backend("reference"):
        assert rmsnorm.get_backend() == "reference"
        slow = rmsnorm.rms_norm(x, w, partial=0.25)
    assert rmsnorm.get_backend() == "auto"
    np.testing.assert_allclose(fast, slow, rtol=2e-6, atol=2e-6)
    with pytest.raises(ValueError):
        rmsnorm.set_backend("gpu")
    with pytest.raises(TypeError):
        rmsnorm.set_backend(1)


def test_every_cpu_target_gives_the_same_bits(rng):
    x = rng.standard_normal((7, 1001)).astype(np.float32)
    w = rng.uniform(0.5, 1.5, 1001).astype(np.float32)
    best = rmsnorm.cpu_target()
    want = rmsnorm.layer_norm(x, w), rmsnorm.rms_norm(x, w, partial=0.3)
    chosen = []
    try:
        for name in ["AVX3_BF16", "AVX3", "AVX2", "SSE4", "SCALAR", "SVE2", "SVE", "NEON", "EMU128"]:
            try:
                rmsnorm.set_cpu_target(name.lower())
            except ValueError:  # another architecture's target
                continue
            chosen.append(rmsnorm.cpu_target())
            got = rmsnorm.layer_norm(x, w), rmsnorm.rms_norm(x, w, partial=0.3)
            for a, b in zip(got, want):
                assert a.tobytes() == b.tobytes(), f"{rmsnorm.cpu_target()} differs from {best}"
    finally:
        rmsnorm.set_cpu_target("auto")
    assert rmsnorm.cpu_target() == best
    assert len(set(chosen)) >= 2, chosen  # at least the best target and the portable one
    with pytest.raises(ValueError, match="unknown CPU target"):
        rmsnorm.set_cpu_target("AVX9")
    with pytest.raises(TypeError):
        rmsnorm.set_cpu_target(None)


def test_partial_size_checks_arguments():
    with pytest.raises(ValueError):
        rmsnorm.partial_size(0, 0.5)
    with pytest.raises(ValueError):
        rmsnorm.partial_size(10, 0.0)
    with pytest.raises(TypeError):
        rmsnorm.partial_size(10.0, 0.5)


def test_library_reports_itself():
    assert rmsnorm.__version__.count(".") == 2
    assert isinstance(rmsnorm.cpu_target(), str) and rmsnorm.cpu_target()


def test_binding_checks_buffer_sizes_and_maps_statuses():
    # The private binding is reachable; a wrong-sized buffer must be an exception, not an overrun.
    from rmsnorm import _C

    x = np.ones((2, 8), np.float32)
    with pytest.raises(ValueError, match="bytes"):
        _C.rms_forward(4, 8, _C.F32, 1e-6, 1.0, 0.0, x, None, None, np.empty((4, 8), np.float32), None)
    with pytest.raises(ValueError, match="writable"):
        ro = np.empty_like(x)
        ro.flags.writeable = False
        _C.rms_forward(2, 8, _C.F32, 1e-6, 1.0, 0.0, x, None, None, ro, None)
    with pytest.raises(ValueError, match="dtype code"):
        _C.rms_forward(2, 8, 7, 1e-6, 1.0, 0.0, x, None, None, np.empty_like(x), None)
    # INVALID_ARGUMENT from the library arrives as ValueError carrying the library's message.
    with pytest.raises(ValueError, match="rmsnorm_forward"):
        _C.rms_forward(2, 8, _C.F32, -1.0, 1.0, 0.0, x, None, None, np.empty_like(x), None)
    with pytest.raises(ValueError, match="rmsnorm_layernorm_backward"):
        _C.layer_backward(2, 8, _C.F32, 1e-5, 1.0, 0.0, x, x, None, np.zeros(2, np.float32), None, np.empty_like(x),
                          None, None)
