// LayerNorm's row statistics as mergeable moments: count, mean and the sum of squared deviations
// (M2) of each chunk, combined in chunk order with Chan et al.'s pairwise update, in double.
#ifndef RMSNORM_SRC_CPU_MOMENTS_H_
#define RMSNORM_SRC_CPU_MOMENTS_H_

#include <cmath>
#include <cstdint>

#include "cpu/row_driver.h"

namespace rmsnorm::cpu {

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

// rstd = 1 / sqrt(M2 / n + eps), when the f32 path computes the row accurately (see kMinF32Statistic).
inline bool MomentsInverseRoot(const Moments& m, float eps, double* rstd) {
  const double var_eps = m.m2 / double(m.count) + double(eps);
  if (!std::isfinite(m.mean) || !std::isfinite(m.m2) || var_eps < kMinF32Statistic || var_eps > kMaxF32Statistic)
    return false;
  *rstd = 1.0 / std::sqrt(var_eps);
  return true;
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

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_MOMENTS_H_
