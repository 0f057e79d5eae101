// The per-vector arithmetic the norms share, compiled once per Highway target: masking the columns
// past a limit, centering on a split mean, the gain and bias epilogue, and the parameter-gradient adds.
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

#include "cpu/convert-inl.h"
#include "cpu/loops-inl.h"
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
HWY_INLINE VF Centered(VF x, VF mean_hi, VF mean_lo) { return hn::Sub(hn::Sub(x, mean_hi), mean_lo); }

// The gain g_i (see EffectiveGain in row_driver.h), or 1 without weights.
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

// Adds a vector into an f32 accumulator row (the parameter-gradient partials).
HWY_INLINE void AccumulateInto(DF d, VF v, float* p, size_t count) {
  Store(d, hn::Add(Load(d, p, count), v), p, count);
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
