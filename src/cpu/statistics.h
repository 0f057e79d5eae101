// When a row's statistic is computed on the f32 path and when it goes to the double path (rare_rows.h),
// and LayerNorm's mergeable moments. These are numeric rules, the same whichever way the rows are
// scheduled: they live apart from the scheduler (row_driver.h), which never looks at a value.
#ifndef RMSNORM_SRC_CPU_STATISTICS_H_
#define RMSNORM_SRC_CPU_STATISTICS_H_

#include <cmath>
#include <cstdint>
#include <cstring>

#include "hwy/base.h"
#include "runtime/problem.h"

namespace rmsnorm::cpu {

// 2^-m for a count n = 2^m, else 0: what DivideBy and the vector rule of a group of rows
// (RmsInverseRoots) multiply by rather than divide by n.
inline double ExactReciprocal(int64_t n) {
  HWY_DASSERT(n >= 1);
  const uint64_t count = uint64_t(n);
  if ((count & (count - 1)) != 0) return 0.0;
  const uint64_t bits = uint64_t(1023 - hwy::Num0BitsBelowLS1Bit_Nonzero64(count)) << 52;  // 2^-m
  double reciprocal;
  std::memcpy(&reciprocal, &bits, sizeof reciprocal);
  return reciprocal;
}

// value / n for a count n >= 1, rounded once. Where n = 2^m it multiplies by 2^-m instead: both are
// the same real number rounded once, so the same bits, and a multiply in place of a divide on each
// row's chain from its sums to its outputs.
inline double DivideBy(double value, int64_t n) {
  const double reciprocal = ExactReciprocal(n);
  return reciprocal != 0.0 ? value * reciprocal : value / double(n);
}

// Statistics below this (mean square + eps, or variance + eps) are beyond what the f32 path computes
// accurately (squares underflow); so are non-finite sums (squares overflow), and for LayerNorm a
// variance above kMaxF32Statistic (chunks of moderate values can merge into deviations beyond f32).
// Such rare rows are recomputed in double: the common path stays fast, and any finite input works.
constexpr double kMinF32Statistic = 0x1p-90;
constexpr double kMaxF32Statistic = 0x1p200;
// The matching bound on a saved rstd: 1 / sqrt(2^-90).
constexpr float kMaxF32Rstd = 0x1p45f;

// The RMSNorm family's rstd = 1 / sqrt(sum_squares / divisor + eps) from the f32 path's sum of squares,
// or false when that sum is beyond what the f32 path computes accurately (the row goes to double).
// One rule for forward and backward, so both send the same rows down the rare path.
inline bool RmsInverseRoot(const Problem& p, double sum_squares, double* rstd) {
  const double ms_eps = DivideBy(sum_squares, p.divisor) + double(p.eps);
  if (!std::isfinite(sum_squares) || ms_eps < kMinF32Statistic) return false;
  *rstd = 1.0 / std::sqrt(ms_eps);
  return true;
}

// ---- LayerNorm's row statistics as mergeable moments: count, mean and the sum of squared deviations
// (M2) of each chunk, combined in chunk order with Chan et al.'s pairwise update, in double ----------

struct Moments {
  int64_t count = 0;
  double mean = 0.0;
  double m2 = 0.0;
};

inline void FoldMoments(Moments& into, const Moments& part) {
  if (part.count == 0) return;
  if (into.count == 0) {
    into = part;
    return;
  }
  const double n = double(into.count + part.count);
  const double delta = part.mean - into.mean;
  into.mean += delta * double(part.count) / n;
  into.m2 += part.m2 + delta * delta * double(into.count) * double(part.count) / n;
  into.count += part.count;
}

// A mean as f32 hi + lo: centering as (x - hi) - lo keeps the bits of the double mean that one f32
// would drop (a row of 16777216 and 16777218 has the mean 16777217, which f32 cannot hold).
struct SplitMean {
  float hi = 0.0f;
  float lo = 0.0f;
};
inline SplitMean Split(double mean) {
  SplitMean m;
  m.hi = static_cast<float>(mean);
  m.lo = static_cast<float>(mean - double(m.hi));
  return m;
}

// Below this, lo falls below f32's normal range and drops the mean's low bits (a row of subnormal
// values): every x - mean would shift by up to 2^-150, which rstd and the gain then scale. Means of
// ordinary rows are far above it, and a zero row's mean splits exactly.
constexpr double kMinSplitMean = 0x1p-100;

// rstd = 1 / sqrt(M2 / n + eps), when the f32 path computes the row accurately (see kMinF32Statistic
// and kMinSplitMean).
inline bool MomentsInverseRoot(const Moments& m, float eps, double* rstd) {
  const double var_eps = DivideBy(m.m2, m.count) + double(eps);
  if (!std::isfinite(m.mean) || !std::isfinite(m.m2) || var_eps < kMinF32Statistic || var_eps > kMaxF32Statistic)
    return false;
  if (std::fabs(m.mean) < kMinSplitMean) {
    const SplitMean split = Split(m.mean);
    if (double(split.hi) + double(split.lo) != m.mean) return false;
  }
  *rstd = 1.0 / std::sqrt(var_eps);
  return true;
}

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_STATISTICS_H_
