// The reference: the definition of every norm as plain loops with double accumulation (the formulas
// themselves are in formulas.h, shared with the kernels' rare rows). No SIMD, no
// threads, no cleverness: the oracle the fast kernels are tested against, and a backend users can
// select at run time (RMSNORM_BACKEND=reference).
//
// Templated on the storage type T of the row tensors (float, bf16, f16, or double for gradient
// checks) and P of the parameters and statistics (float, or double).
//
// Each row is read into double before anything is written, so outputs may alias inputs.
#ifndef RMSNORM_SRC_REF_NORMS_H_
#define RMSNORM_SRC_REF_NORMS_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "ref/formulas.h"
#include "ref/storage.h"
#include "runtime/problem.h"

namespace rmsnorm::ref {

template <class T, class P>
struct Forward {
  const T* x = nullptr;         // (rows, cols)
  const T* residual = nullptr;  // (rows, cols) or null: fused add
  const P* weight = nullptr;    // (cols) or null
  const P* bias = nullptr;      // (cols) or null
  T* y = nullptr;               // (rows, cols)
  T* residual_out = nullptr;    // (rows, cols), with residual
  P* mean = nullptr;            // (rows) or null, LayerNorm
  P* rstd = nullptr;            // (rows) or null
};

template <class T, class P>
struct Backward {
  const T* dy = nullptr;       // (rows, cols)
  const T* x = nullptr;        // (rows, cols)
  const P* weight = nullptr;   // (cols) or null
  const P* mean = nullptr;     // (rows) or null, LayerNorm
  const P* rstd = nullptr;     // (rows) or null: recompute
  T* dx = nullptr;             // (rows, cols)
  P* dweight = nullptr;        // (cols) or null
  P* dbias = nullptr;          // (cols) or null
};

// g = weight_offset + weight[i], summed in the parameters' type: in f32 as the kernels sum it (one
// rounding; a sum beyond f32's range is an infinite gain in both, as the header says), in double for
// the gradient checks' double parameters.
template <class P>
double Gain(const Problem& p, const P* weight, int64_t i) {
  return weight ? double(static_cast<P>(static_cast<P>(p.weight_offset) + weight[i])) : 1.0;
}

template <class T>
void LoadRow(const T* row, int64_t n, std::vector<double>& out) {
  out.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = ToDouble(row[i]);
}

// A loaded row as the accessor the formulas take.
inline auto Row(const std::vector<double>& a) {
  return [&a](int64_t i) { return a[size_t(i)]; };
}

template <class T, class P>
void WriteParamGrads(const Problem& p, const std::vector<double>& dweight, const std::vector<double>& dbias,
                     const Backward<T, P>& b) {
  for (int64_t i = 0; i < p.cols; ++i) {
    if (b.dweight) b.dweight[i] = static_cast<P>(dweight[i]);
    if (b.dbias) b.dbias[i] = static_cast<P>(dbias[i]);
  }
}

// The RMSNorm family's input for row `row` in a: x, or with a residual x + residual rounded to T, which
// is also stored to residual_out (r: scratch for the residual row).
template <class T, class P>
void LoadRmsInput(const Problem& p, const Forward<T, P>& f, int64_t row, std::vector<double>& a,
                  std::vector<double>& r) {
  LoadRow(f.x + p.RowStart(registry::kX, row), p.cols, a);
  if (!f.residual) return;
  LoadRow(f.residual + p.RowStart(registry::kResidual, row), p.cols, r);
  T* residual_out = f.residual_out + p.RowStart(registry::kResidualOut, row);
  for (int64_t i = 0; i < p.cols; ++i) {
    const T h = FromDouble<T>(a[i] + r[i]);
    residual_out[i] = h;
    a[i] = ToDouble(h);
  }
}

// RMSNorm family forward: y = a * rstd * g (+ b), a = x (+ residual, rounded to T).
template <class T, class P>
void RmsForward(const Problem& p, const Forward<T, P>& f) {
  std::vector<double> a, r;
  for (int64_t row = 0; row < p.rows; ++row) {
    LoadRmsInput(p, f, row, a, r);
    const double rstd = formula::RmsInverseRoot(p, Row(a));
    T* y = f.y + p.RowStart(registry::kY, row);
    for (int64_t i = 0; i < p.cols; ++i) {
      const double bias = f.bias ? double(f.bias[i]) : 0.0;
      y[i] = FromDouble<T>(formula::Normalized(a[i], 0.0, rstd, Gain(p, f.weight, i), bias));
    }
    if (f.rstd) f.rstd[row] = static_cast<P>(rstd);
  }
}

// dx_i = rstd * (u_i - [i < k] * xhat_i * sum_j(u_j * xhat_j) / divisor), u = dy * g, xhat = x * rstd.
template <class T, class P>
void RmsBackward(const Problem& p, const Backward<T, P>& b) {
  std::vector<double> a, dy, dweight(static_cast<size_t>(p.cols)), dbias(static_cast<size_t>(p.cols));
  for (int64_t row = 0; row < p.rows; ++row) {
    LoadRow(b.x + p.RowStart(registry::kX, row), p.cols, a);
    LoadRow(b.dy + p.RowStart(registry::kDy, row), p.cols, dy);
    T* dx = b.dx + p.RowStart(registry::kDx, row);
    const bool saved = b.rstd && SavedRstdUsable(static_cast<float>(b.rstd[row]));
    const double rstd = saved ? double(b.rstd[row]) : formula::RmsInverseRoot(p, Row(a));
    const auto gain = [&](int64_t i) { return Gain(p, b.weight, i); };
    const double c = formula::RmsBackwardCoefficient(p, Row(dy), Row(a), gain, rstd);
    for (int64_t i = 0; i < p.cols; ++i) {
      dx[i] = FromDouble<T>(formula::RmsDx(p, i, dy[i], a[i], gain(i), rstd, c));
      dweight[i] += formula::DweightTerm(dy[i], a[i], 0.0, rstd);
      dbias[i] += dy[i];
    }
  }
  if (p.rows > 0) WriteParamGrads(p, dweight, dbias, b);
}

template <class T, class P>
void LayerNormForward(const Problem& p, const Forward<T, P>& f) {
  std::vector<double> a;
  for (int64_t row = 0; row < p.rows; ++row) {
    LoadRow(f.x + p.RowStart(registry::kX, row), p.cols, a);
    double mean, rstd;
    formula::LayerStats(p, Row(a), &mean, &rstd);
    T* y = f.y + p.RowStart(registry::kY, row);
    for (int64_t i = 0; i < p.cols; ++i) {
      const double bias = f.bias ? double(f.bias[i]) : 0.0;
      y[i] = FromDouble<T>(formula::Normalized(a[i], mean, rstd, Gain(p, f.weight, i), bias));
    }
    if (f.mean) f.mean[row] = static_cast<P>(mean);
    if (f.rstd) f.rstd[row] = static_cast<P>(rstd);
  }
}

// dx_i = rstd * (u_i - mean(u) - xhat_i * mean(u * xhat)), xhat = (x - mean) * rstd.
template <class T, class P>
void LayerNormBackward(const Problem& p, const Backward<T, P>& b) {
  std::vector<double> a, dy, dweight(static_cast<size_t>(p.cols)), dbias(static_cast<size_t>(p.cols));
  for (int64_t row = 0; row < p.rows; ++row) {
    LoadRow(b.x + p.RowStart(registry::kX, row), p.cols, a);
    LoadRow(b.dy + p.RowStart(registry::kDy, row), p.cols, dy);
    T* dx = b.dx + p.RowStart(registry::kDx, row);
    double mean, rstd;
    if (b.rstd && b.mean && SavedLayerStatsUsable(static_cast<float>(b.mean[row]), static_cast<float>(b.rstd[row]))) {
      mean = double(b.mean[row]);
      rstd = double(b.rstd[row]);
    } else {
      formula::LayerStats(p, Row(a), &mean, &rstd);
    }
    const auto gain = [&](int64_t i) { return Gain(p, b.weight, i); };
    double mean_u, mean_u_xhat;
    formula::LayerBackwardMeans(p, Row(dy), Row(a), gain, mean, rstd, &mean_u, &mean_u_xhat);
    for (int64_t i = 0; i < p.cols; ++i) {
      dx[i] = FromDouble<T>(formula::LayerDx(dy[i], a[i], gain(i), mean, rstd, mean_u, mean_u_xhat));
      dweight[i] += formula::DweightTerm(dy[i], a[i], mean, rstd);
      dbias[i] += dy[i];
    }
  }
  if (p.rows > 0) WriteParamGrads(p, dweight, dbias, b);
}

// The entry points the C ABI calls: dispatch on problem.dtype, parameters in f32.
void RmsForward(const Problem& p, const ForwardArgs& args);
void RmsBackward(const Problem& p, const BackwardArgs& args);
void LayerNormForward(const Problem& p, const ForwardArgs& args);
void LayerNormBackward(const Problem& p, const BackwardArgs& args);
// RmsForward with y (the double value rounded to f32) quantized by ref/quantize.h into `out`.
void RmsForwardQuantized(const Problem& p, const ForwardArgs& args, const QuantizedOutput& out);

}  // namespace rmsnorm::ref

#endif  // RMSNORM_SRC_REF_NORMS_H_
