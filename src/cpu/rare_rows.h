// The slow, exact path for rows the f32 path cannot take: statistics beyond f32's squared range
// (|x| above about 1e19 or below about 1e-19 with a tiny eps), or non-finite sums. Scalar double
// arithmetic reaches every finite f32 input; such rows are rare, so speed does not matter here. The
// formulas are the reference's (src/ref/formulas.h), over rows read straight from storage.
#ifndef RMSNORM_SRC_CPU_RARE_ROWS_H_
#define RMSNORM_SRC_CPU_RARE_ROWS_H_

#include <cstdint>
#include <cstring>

#include "cpu/dispatch.h"
#include "hwy/base.h"
#include "ref/formulas.h"
#include "registry/registry.h"
#include "runtime/problem.h"

namespace rmsnorm::cpu {

// A kernel storage value (Highway's type) as double, and a double rounded through f32 to it, by way of
// the C++ storage type of the same bits (registry/dtypes.inc): one rounding rule for every dtype.
template <class T>
double ToDouble(T v) {
  typename StorageOf<T>::type storage;
  static_assert(sizeof storage == sizeof v, "a kernel type holds its dtype's bits");
  std::memcpy(&storage, &v, sizeof v);
  return registry::ToFloat(storage);
}
template <class T>
void StoreDouble(double v, T* out) {
  const auto storage = registry::FromFloat<typename StorageOf<T>::type>(static_cast<float>(v));
  static_assert(sizeof storage == sizeof *out, "a kernel type holds its dtype's bits");
  std::memcpy(out, &storage, sizeof storage);
}

// A row in storage as the accessor the formulas take.
template <class T>
auto RowOf(const T* row) {
  return [row](int64_t i) { return ToDouble(row[i]); };
}

// The RMSNorm family's rstd in double, from a row's first k elements (0 when ms + eps is 0).
template <class T>
double RmsInverseRootDouble(const T* row, const Problem& p) {
  return formula::RmsInverseRoot(p, RowOf(row));
}

// LayerNorm's mean and rstd in double.
template <class T>
void LayerStatsDouble(const T* row, const Problem& p, double* mean, double* rstd) {
  formula::LayerStats(p, RowOf(row), mean, rstd);
}

// The gain (see EffectiveGain), or 1 without weights; and as an accessor.
inline double GainDouble(const float* gain, int64_t i) { return gain ? double(gain[i]) : 1.0; }
inline auto GainOf(const float* gain) {
  return [gain](int64_t i) { return GainDouble(gain, i); };
}

// Not vectorized, and out of line: one machine-code instance per storage type, shared by every SIMD
// target and by every caller (a row alone or in a group). Where two NaNs meet (a NaN row and a NaN
// gain), which payload survives depends on the operand order of the instruction, which a vectorized or
// differently inlined copy may swap.
#if defined(__GNUC__) && !defined(__clang__)
#define RMSNORM_RARE_ROW_FUNCTION [[gnu::noinline, gnu::optimize("no-tree-vectorize")]]
#else
#define RMSNORM_RARE_ROW_FUNCTION [[gnu::noinline]]
#endif

// A forward's rare row, columns [0, n): y = ((x - mean) * rstd) * g + b in double (mean 0 for the
// RMSNorm family, where x - 0 is x). gain, bias: (n) f32 or null (g = 1, b = 0).
// y is in T, or in f32 for an output that is quantized next.
template <class T, class Y>
RMSNORM_RARE_ROW_FUNCTION void RareForwardRow(const T* x, Y* y, int64_t n, double mean, double rstd, const float* gain,
                                              const float* bias) {
  for (int64_t i = 0; i < n; ++i)
    StoreDouble(formula::Normalized(ToDouble(x[i]), mean, rstd, GainDouble(gain, i), bias ? double(bias[i]) : 0.0), y + i);
}

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_RARE_ROWS_H_
