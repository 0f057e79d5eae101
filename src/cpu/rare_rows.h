// The slow, exact path for rows the f32 path cannot take: statistics beyond f32's squared range
// (|x| above about 1e19 or below about 1e-19 with a tiny eps), or non-finite sums. Scalar double
// arithmetic reaches every finite f32 input; such rows are rare, so speed does not matter here. The
// formulas are the reference's (src/ref/formulas.h), over rows read straight from storage.
#ifndef RMSNORM_SRC_CPU_RARE_ROWS_H_
#define RMSNORM_SRC_CPU_RARE_ROWS_H_

#include <cstdint>
#include <cstring>
#include <vector>

#include "cpu/dispatch.h"
#include "cpu/row_tensor.h"
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

// The gain (see ColumnParam in row_driver.h), or 1 without weights; and as an accessor.
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

// ---- Parameter gradients beyond f32 ----------------------------------------------------------------
//
// The kernels sum dweight and dbias in f32 within a row block (row_driver.h), each row's term rounded
// to f32 first. Where a term or a partial sum passes f32's range (dy near f32's maximum, or x-hat
// large in pRMSNorm's columns past k) the column becomes +-inf or NaN (inf - inf), though the sum over
// all rows, in double as the reference takes it, may be finite or exactly 0. A sum that left f32 stays
// non-finite through the f32 and double additions after it, so a column that comes out non-finite is
// exactly a column to redo: it is summed again over every row in double, in row order with the
// reference's terms, which gives the reference's value (also NaN where an input NaN reaches it).
// Ordinary calls pay only the check below over the outputs' cols floats. In place (dx aliasing dy or
// x) the inputs are gone when the check runs, and the column keeps its f32 sum.

// Whether v[0, n) are all finite (true for v null). Branch-free, so that it vectorizes.
inline bool AllFinite(const float* v, int64_t n) {
  if (v == nullptr) return true;
  uint32_t any = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    any |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
  }
  return any == 0;
}

// Sums the non-finite columns of dweight and dbias (each (cols) f32, or null) again in double over all
// rows. stats(row, x_row, &mean, &rstd) gives a row's statistics as the reference's backward takes
// them (the saved ones where usable, else recomputed in double); mean is 0 for the RMSNorm family.
// Out of line and not vectorized, as RareForwardRow: the same bits on every target.
template <class T, class Stats>
RMSNORM_RARE_ROW_FUNCTION void ResumParamGradColumns(const Problem& p, const RowTensor<const T>& dy,
                                                     const RowTensor<const T>& x, const Stats& stats,
                                                     float* dweight, float* dbias) {
  std::vector<int64_t> dw_cols, db_cols;
  for (int64_t c = 0; c < p.cols; ++c) {
    if (dweight && !AllFinite(dweight + c, 1)) dw_cols.push_back(c);
    if (dbias && !AllFinite(dbias + c, 1)) db_cols.push_back(c);
  }
  std::vector<double> dw_sums(dw_cols.size(), 0.0), db_sums(db_cols.size(), 0.0);
  for (int64_t row = 0; row < p.rows; ++row) {
    const T* dy_row = dy.Row(row);
    const T* x_row = x.Row(row);
    if (!dw_cols.empty()) {
      double mean = 0.0, rstd = 0.0;
      stats(row, x_row, &mean, &rstd);
      for (size_t j = 0; j < dw_cols.size(); ++j) {
        const int64_t c = dw_cols[j];
        dw_sums[j] += formula::DweightTerm(ToDouble(dy_row[c]), ToDouble(x_row[c]), mean, rstd);
      }
    }
    for (size_t j = 0; j < db_cols.size(); ++j) db_sums[j] += ToDouble(dy_row[db_cols[j]]);
  }
  for (size_t j = 0; j < dw_cols.size(); ++j) dweight[dw_cols[j]] = static_cast<float>(dw_sums[j]);
  for (size_t j = 0; j < db_cols.size(); ++j) dbias[db_cols[j]] = static_cast<float>(db_sums[j]);
}

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_RARE_ROWS_H_
