// What a validated call asks for, in the form both backends (src/ref, src/cpu) take.
#ifndef RMSNORM_SRC_RUNTIME_PROBLEM_H_
#define RMSNORM_SRC_RUNTIME_PROBLEM_H_

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"

namespace rmsnorm {

using registry::DtypeSize;  // bytes per element of the (rows, cols) tensors

// Where the rows of one (rows, cols) tensor start, in elements from its pointer (an _ex call's strides,
// resolved: never 0). Row r is (o, i) = (r / inner_rows, r % inner_rows) and starts at o * outer +
// i * inner.
struct RowLayout {
  int64_t outer = 0;
  int64_t inner = 0;
};

// The statistic of the RMSNorm family is sum_{i<k} x_i^2 / divisor: RMSNorm (k = divisor = cols),
// pRMSNorm (k = divisor = ceil(p * cols)) and L2-Norm (k = cols, divisor = 1) share one kernel.
// LayerNorm ignores k and divisor.
struct Problem {
  int64_t rows = 0;
  int64_t cols = 0;
  rmsnorm_dtype dtype = RMSNORM_F32;
  float eps = 0.0f;
  float weight_offset = 0.0f;
  int64_t k = 0;
  int64_t divisor = 1;
  // Row layouts: without `strided` every row tensor is packed (row r at r * cols) and `layout` is not
  // read. Indexed by registry::Tensor; only the row tensors' entries are used.
  bool strided = false;
  int64_t inner_rows = 1;
  RowLayout layout[registry::kNumTensors];

  // Row `row` of row tensor t, in elements from the tensor's pointer.
  int64_t RowStart(registry::Tensor t, int64_t row) const {
    if (!strided) return row * cols;
    const RowLayout& l = layout[t];
    if (inner_rows == 1) return row * l.outer;
    const int64_t outer = row / inner_rows;
    return outer * l.outer + (row - outer * inner_rows) * l.inner;
  }
};

// Row tensors are in problem.dtype; the rest are f32. A null pointer is an absent optional.
struct ForwardArgs {
  const void* x = nullptr;         // (rows, cols)
  const void* residual = nullptr;  // (rows, cols): fused add, RMSNorm family only
  const float* weight = nullptr;   // (cols)
  const float* bias = nullptr;     // (cols)
  void* y = nullptr;               // (rows, cols)
  void* residual_out = nullptr;    // (rows, cols): x + residual, when residual is given
  float* mean = nullptr;           // (rows): LayerNorm only
  float* rstd = nullptr;           // (rows)
};

// A quantized forward's output in place of y (registry/quant_formats.inc): q's rows at
// Problem::RowStart(registry::kQ, row) elements of format->unit_bytes; scales per format->scales.
struct QuantizedOutput {
  const registry::QuantFormatInfo* format = nullptr;
  void* q = nullptr;
  float* scales = nullptr;  // (rows) written, or (1) read for a static scale, or null
};

struct BackwardArgs {
  const void* dy = nullptr;       // (rows, cols)
  const void* x = nullptr;        // (rows, cols)
  const float* weight = nullptr;  // (cols)
  const float* mean = nullptr;    // (rows): LayerNorm only; null with rstd means recompute
  const float* rstd = nullptr;    // (rows): null means recompute
  void* dx = nullptr;             // (rows, cols)
  float* dweight = nullptr;       // (cols)
  float* dbias = nullptr;         // (cols)
};

// A saved rstd is used when it is a positive normal f32; 0 (a zero row), infinity or a subnormal (rows
// beyond f32's squared range) make the backward recompute the statistics from x, in double.
inline bool SavedRstdUsable(float rstd) { return std::isnormal(rstd) && rstd > 0.0f; }

// A saved LayerNorm mean is one f32, off by up to |mean| * 2^-24; the backward multiplies that by rstd
// into every x-hat. Where |mean| * rstd exceeds this (a row whose mean dwarfs its spread), or the mean
// is not finite, the backward recomputes the row's statistics from x in double instead. Rows of
// ordinary data (|mean| a few standard deviations at most) keep their saved statistics.
constexpr double kMaxSavedMeanTimesRstd = 128.0;
inline bool SavedLayerStatsUsable(float mean, float rstd) {
  return SavedRstdUsable(rstd) && std::fabs(double(mean)) * double(rstd) <= kMaxSavedMeanTimesRstd;
}

}  // namespace rmsnorm

#endif  // RMSNORM_SRC_RUNTIME_PROBLEM_H_
