// The norms' definitions in double, each written once. A row is an accessor, value(i) -> double, so
// the reference backend (norms.h, over rows loaded into double) and the SIMD kernels' rare rows
// (src/cpu/rare_rows.h, straight from storage) compute with the very same expressions.
#ifndef RMSNORM_SRC_REF_FORMULAS_H_
#define RMSNORM_SRC_REF_FORMULAS_H_

#include <cmath>
#include <cstdint>

#include "runtime/problem.h"

namespace rmsnorm::formula {

// The statistics' shared rule: a row whose ms + eps (or var + eps) is 0 normalizes to 0 and reports
// rstd 0, rather than dividing by zero.
inline double InverseRootOrZero(double ms_plus_eps) {
  return ms_plus_eps == 0.0 ? 0.0 : 1.0 / std::sqrt(ms_plus_eps);
}

// The RMSNorm family's rstd = 1 / sqrt(sum_{i<k} x_i^2 / divisor + eps).
template <class X>
double RmsInverseRoot(const Problem& p, const X& x) {
  double sum_squares = 0.0;
  for (int64_t i = 0; i < p.k; ++i) sum_squares += x(i) * x(i);
  return InverseRootOrZero(sum_squares / double(p.divisor) + double(p.eps));
}

// LayerNorm's mean and rstd = 1 / sqrt(var + eps), in two passes over the row.
template <class X>
void LayerStats(const Problem& p, const X& x, double* mean, double* rstd) {
  double sum = 0.0;
  for (int64_t i = 0; i < p.cols; ++i) sum += x(i);
  const double mu = sum / double(p.cols);
  double centered_squares = 0.0;
  for (int64_t i = 0; i < p.cols; ++i) centered_squares += (x(i) - mu) * (x(i) - mu);
  *mean = mu;
  *rstd = InverseRootOrZero(centered_squares / double(p.cols) + double(p.eps));
}

// A forward's output: ((x - mean) * rstd) * g + b, with mean 0 for the RMSNorm family (x - 0 is x).
inline double Normalized(double x, double mean, double rstd, double gain, double bias) {
  return (x - mean) * rstd * gain + bias;
}

// The RMSNorm family's backward, with u = dy * g and xhat = x * rstd:
//   c = sum_j(u_j * xhat_j) / divisor,   dx_i = rstd * (u_i - [i < k] * xhat_i * c).
template <class Dy, class X, class Gain>
double RmsBackwardCoefficient(const Problem& p, const Dy& dy, const X& x, const Gain& gain, double rstd) {
  double dot = 0.0;
  for (int64_t i = 0; i < p.cols; ++i) dot += dy(i) * gain(i) * x(i) * rstd;
  return dot / double(p.divisor);
}
inline double RmsDx(const Problem& p, int64_t i, double dy, double x, double gain, double rstd, double c) {
  const double correction = i < p.k ? x * rstd * c : 0.0;
  return rstd * (dy * gain - correction);
}

// LayerNorm's backward, with u = dy * g and xhat = (x - mean) * rstd:
//   dx_i = rstd * (u_i - mean(u) - xhat_i * mean(u * xhat)).
template <class Dy, class X, class Gain>
void LayerBackwardMeans(const Problem& p, const Dy& dy, const X& x, const Gain& gain, double mean, double rstd,
                        double* mean_u, double* mean_u_xhat) {
  double sum_u = 0.0, sum_u_xhat = 0.0;
  for (int64_t i = 0; i < p.cols; ++i) {
    const double u = dy(i) * gain(i);
    sum_u += u;
    sum_u_xhat += u * (x(i) - mean) * rstd;
  }
  *mean_u = sum_u / double(p.cols);
  *mean_u_xhat = sum_u_xhat / double(p.cols);
}
inline double LayerDx(double dy, double x, double gain, double mean, double rstd, double mean_u,
                      double mean_u_xhat) {
  const double xhat = (x - mean) * rstd;
  return rstd * (dy * gain - mean_u - xhat * mean_u_xhat);
}

// The parameter gradients' terms of one element: dweight += dy * xhat, dbias += dy.
inline double DweightTerm(double dy, double x, double mean, double rstd) { return dy * ((x - mean) * rstd); }

}  // namespace rmsnorm::formula

#endif  // RMSNORM_SRC_REF_FORMULAS_H_
