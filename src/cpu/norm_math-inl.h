// The per-vector arithmetic the norms share, compiled once per Highway target: masking the columns
// past a limit, centering on a split mean, the gain and bias epilogue and its range, the largest
// magnitude over a range, and the parameter-gradient adds.
// One definition of each, so that every kernel that needs one rounds it the same way (a forward and its
// backward center x alike, every forward ends in the same epilogue).

// Per-target include guard, the Highway way.
#if defined(RMSNORM_SRC_CPU_NORM_MATH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RMSNORM_SRC_CPU_NORM_MATH_INL_H_
#undef RMSNORM_SRC_CPU_NORM_MATH_INL_H_
#else
#define RMSNORM_SRC_CPU_NORM_MATH_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "cpu/convert-inl.h"
#include "cpu/loops-inl.h"
#include "cpu/statistics.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

// c in the lanes of the vector at i whose column is below `limit`, 0 in the others.
HWY_INLINE VF BelowLimit(DF d, VF c, size_t i, size_t limit) {
  if (i + hn::Lanes(d) <= limit) return c;
  if (i >= limit) return hn::Zero(d);
  return hn::IfThenElseZero(hn::FirstN(d, limit - i), c);
}

// (x - mean) as (x - hi) - lo, see SplitMean (statistics.h).
template <class V>
HWY_INLINE V Centered(V x, V mean_hi, V mean_lo) {
  return hn::Sub(hn::Sub(x, mean_hi), mean_lo);
}

// The gain g_i (see ColumnParam in row_driver.h), or 1 without weights.
template <bool kWeight>
HWY_INLINE VF Gain(DF d, const float* gain, size_t i, size_t count) {
  if constexpr (kWeight) {
    return Load(d, gain + i, count);
  } else {
    (void)gain, (void)i, (void)count;
    return hn::Set(d, 1.0f);
  }
}

// v * g (+ b): the affine epilogue of every forward, rounded after the product and after the sum.
template <bool kWeight, bool kBias>
HWY_INLINE VF ScaleShift(DF d, VF v, const float* gain, const float* bias, size_t i, size_t count) {
  if constexpr (kWeight && kBias) return hn::Add(hn::Mul(v, Gain<true>(d, gain, i, count)), Load(d, bias + i, count));
  if constexpr (kWeight) return hn::Mul(v, Gain<true>(d, gain, i, count));
  if constexpr (kBias) return hn::Add(v, Load(d, bias + i, count));
  (void)gain, (void)bias, (void)i, (void)count;
  return v;
}

// ---- The inverse roots of a group of rows --------------------------------------------------------------
//
// RmsInverseRoot (statistics.h) of sums[0, count), each rounded to f32 into rstds, or false (rstds then
// unspecified) where a row takes the double path. The same operations lane by lane in double vectors (a
// quotient, a sum, a square root and a quotient, each rounded once), so the same bits as the scalar
// rule: a group of short rows then waits on one chain of divides and roots rather than one per row.
// sums and rstds hold kRows entries, a multiple of 8; the sums past count are overwritten.
template <size_t kRows>
HWY_INLINE bool RmsInverseRoots(const Problem& p, float* sums, size_t count, float* rstds) {
  static_assert(kRows % 8 == 0, "whole vectors of up to 8 doubles");
  HWY_DASSERT(count <= kRows);
#if HWY_HAVE_FLOAT64
  const hn::CappedTag<double, 8> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t N = hn::Lanes(dd);
  for (size_t r = count; r % N != 0; ++r) sums[r] = 0.0f;  // lanes past count: defined, then ignored
  const auto divisor = hn::Set(dd, double(p.divisor));
  const double exact_reciprocal = ExactReciprocal(p.divisor);
  const auto reciprocal = hn::Set(dd, exact_reciprocal);
  const auto eps = hn::Set(dd, double(p.eps));
  const auto min_statistic = hn::Set(dd, kMinF32Statistic);
  for (size_t i = 0; i < count; i += N) {
    const auto sum = hn::PromoteTo(dd, hn::LoadU(df, sums + i));
    // DivideBy's bits: a divide is the longest step of the chain from a group's sums to its outputs.
    // (An if, not ?:, which crashed GCC 12 here.)
    auto mean_square = hn::Mul(sum, reciprocal);
    if (exact_reciprocal == 0.0) mean_square = hn::Div(sum, divisor);
    const auto ms_eps = hn::Add(mean_square, eps);
    const auto rare = hn::Or(hn::Not(hn::IsFinite(sum)), hn::Lt(ms_eps, min_statistic));
    if (!hn::AllFalse(dd, hn::And(rare, hn::FirstN(dd, count - i)))) return false;
    hn::StoreU(hn::DemoteTo(df, hn::Div(hn::Set(dd, 1.0), hn::Sqrt(ms_eps))), df, rstds + i);
  }
  return true;
#else
  for (size_t r = 0; r < count; ++r) {
    double rstd;
    if (!RmsInverseRoot(p, double(sums[r]), &rstd)) return false;
    rstds[r] = static_cast<float>(rstd);
  }
  return true;
#endif
}

// ---- The largest magnitude over a range ------------------------------------------------------------
//
// A running maximum of |v|'s bits: start from hn::Zero(DI32()), add vectors with AddMagnitudes, read
// it with MaxOfMagnitudes. |v|'s bits as integers order as the magnitudes do, with +inf above every
// finite value and every NaN above +inf, so an integer maximum is exact, needs no order, and reports a
// NaN anywhere (a float max would drop or keep NaN depending on the target). Functions, not a class:
// SVE vectors cannot be members. The first count lanes of v count (a partial vector's others may hold
// anything, NaN included).
HWY_INLINE hn::Vec<DI32> AddMagnitudes(hn::Vec<DI32> max_bits, VF v, size_t count) {
  const DF d;
  const DI32 di;
  if (HWY_UNLIKELY(count < hn::Lanes(d))) v = hn::IfThenElseZero(hn::FirstN(d, count), v);
  return hn::Max(max_bits, hn::And(hn::BitCast(di, v), hn::Set(di, 0x7FFFFFFF)));
}

// max|v| as bits, 0 when nothing was added.
HWY_INLINE uint32_t MaxOfMagnitudes(hn::Vec<DI32> max_bits) {
  return static_cast<uint32_t>(hn::GetLane(hn::MaxOfLanes(DI32(), max_bits)));
}

// The bits of max|v_i| over [0, n) (0 for n = 0). Four running maxima, so that a long range is not one
// chain of dependent maxima.
HWY_INLINE uint32_t MaxMagnitudeBits(const float* v, size_t n) {
  const DF d;
  const DI32 di;
  const size_t N = hn::Lanes(d);
  const auto magnitude = hn::Set(di, 0x7FFFFFFF);
  auto max0 = hn::Zero(di), max1 = hn::Zero(di), max2 = hn::Zero(di), max3 = hn::Zero(di);
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    max0 = hn::Max(max0, hn::And(hn::BitCast(di, hn::LoadU(d, v + i)), magnitude));
    max1 = hn::Max(max1, hn::And(hn::BitCast(di, hn::LoadU(d, v + i + N)), magnitude));
    max2 = hn::Max(max2, hn::And(hn::BitCast(di, hn::LoadU(d, v + i + 2 * N)), magnitude));
    max3 = hn::Max(max3, hn::And(hn::BitCast(di, hn::LoadU(d, v + i + 3 * N)), magnitude));
  }
  for (; i < n; i += N) max0 = AddMagnitudes(max0, Load(d, v + i, HWY_MIN(N, n - i)), HWY_MIN(N, n - i));
  return MaxOfMagnitudes(hn::Max(hn::Max(max0, max1), hn::Max(max2, max3)));
}

// Whether every column of a backward's parameter gradients (each (cols) f32, or null) is finite. Called
// by RunBackward (row_driver.h) after every call, which finds it through the kernel's namespace, as
// RunBlockRows, so that it runs as vectors of the kernel's target: the baseline's scalar loop took a
// third of a decode row's backward on AVX2.
template <class Kernel>
bool ParamGradsFinite(const Kernel& /* for the lookup */, const float* dweight, const float* dbias, int64_t cols) {
  return (dweight == nullptr || MaxMagnitudeBits(dweight, size_t(cols)) < 0x7F800000u) &&
         (dbias == nullptr || MaxMagnitudeBits(dbias, size_t(cols)) < 0x7F800000u);
}

// Whether a magnitude's bits (as AddMagnitudes keeps them) stand for less than 2^126: false for
// +inf and NaN. A backward whose |u| stays below 2^126 cannot overflow an intermediate of dx.
HWY_INLINE bool MagnitudeBelow2p126(uint32_t bits) { return bits < 0x7E800000u; }

HWY_INLINE float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// max |v_i * g_i| over [0, n) for v_i = normalize(in_i), with g_i the gain (kWeight) or 1, and 1 where
// the gain is not finite (such a column is not finite on either path): +inf if any product is, NaN if
// any is NaN.
template <bool kWeight, class T, class Normalize>
HWY_INLINE float MaxGainedMagnitude(DF d, const T* in, const float* gain, size_t n, const Normalize& normalize) {
  auto max_bits = hn::Zero(DI32());
  ForEachVector(d, n, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA {
    VF v = normalize(Load(d, in + i, count));
    if constexpr (kWeight) {
      const VF g = Load(d, gain + i, count);
      v = hn::Mul(v, hn::IfThenElse(hn::IsFinite(g), g, hn::Set(d, 1.0f)));
    } else {
      (void)gain;
    }
    max_bits = AddMagnitudes(max_bits, v, count);
  });
  return FloatFromBits(MaxOfMagnitudes(max_bits));
}

// ---- The epilogue's range ---------------------------------------------------------------------------
//
// A forward's epilogue rounds v = x-hat to f32, then v * g, before the bias. Where v passes f32's range
// a gain below 1 could bring the exact y back, and where v * g does, a bias of the other sign could:
// the f32 epilogue gives +-inf there. A chunk where either comes within a factor of 2 of f32's
// overflow takes the double path instead (rare_rows.h), which gives the reference's y. Below the
// statistic's k, |v| is at most v_bound (sqrt(k) for RMSNorm and pRMSNorm, 1 for L2-Norm, sqrt(cols)
// for LayerNorm), so those columns need a look only where the gain is huge; pRMSNorm's columns past k
// have no bound, and need one unless |v * g| <= |x| there (rstd <= 1 and gains of at most 1, or no
// bias). Finite gains only: an infinite or NaN gain makes its column non-finite on either path.
struct EpilogueRange {
  float gain_factor = 1.0f;  // max(1, max finite |g|) with a bias, else 1
  bool huge_gain = false;    // v_bound * gain_factor may reach 2^126: every column needs a look
};

template <bool kWeight, bool kBias>
HWY_INLINE EpilogueRange MakeEpilogueRange(const float* gain, int64_t cols, double v_bound) {
  EpilogueRange range;
  if constexpr (kBias && kWeight) {
    // An integer maximum of |g|'s bits; a second pass without the non-finite gains only where there
    // are some.
    float gain_max = FloatFromBits(MaxMagnitudeBits(gain, size_t(cols)));
    if (!(gain_max <= std::numeric_limits<float>::max())) {
      gain_max = MaxGainedMagnitude<false>(DF(), gain, nullptr, size_t(cols), [](VF g) RMSNORM_INLINE_LAMBDA {
        return hn::IfThenElseZero(hn::IsFinite(g), g);
      });
    }
    range.gain_factor = gain_max > 1.0f ? gain_max : 1.0f;
    range.huge_gain = !(double(range.gain_factor) * v_bound < 0x1p126);
  } else {
    (void)gain, (void)cols, (void)v_bound;
  }
  return range;
}

// Whether a chunk takes the double path: max_product is the largest |v * g| over the columns looked
// at (see MaxGainedMagnitude), or the largest |v| with the gain's bound as `factor`.
HWY_INLINE bool NearOverflow(float max_product, float factor = 1.0f) {
  return !(double(max_product) * double(factor) < 0x1p127);
}

// Adds a vector into an f32 accumulator row (the parameter-gradient partials).
HWY_INLINE void AccumulateInto(DF d, VF v, float* p, size_t count) {
  Store(d, hn::Add(Load(d, p, count), v), p, count);
}

// AccumulateInto of v0 and then of v1, bit for bit, with one load and one store.
HWY_INLINE void AccumulateTwoInto(DF d, VF v0, VF v1, float* p, size_t count) {
  Store(d, hn::Add(hn::Add(Load(d, p, count), v0), v1), p, count);
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
