// The arrays of one (dtype, shape), shared by every case and stream loop over that shape so the
// op and its limit touch the very same memory. Created on first use, filled and first-touched then,
// and kept while consecutive cases use the same dtype and shape.
#ifndef RMSNORM_BENCH_WORKSPACE_H_
#define RMSNORM_BENCH_WORKSPACE_H_

#include <array>
#include <memory>

#include "cases.h"
#include "tensor.h"

namespace rmsnorm_bench {

enum class Role { kX, kResidual, kDy, kY, kResidualOut, kDx };
constexpr int kNumRoles = 6;

class Workspace {
 public:
  // Frees everything when dtype or shape differ from what is held.
  void Prepare(rmsnorm_dtype dtype, Shape shape);

  // (rows, cols) in the dtype. Inputs (x, residual, dy) hold pseudo-random values; outputs zeros.
  // Inputs are never written by any case, so they stay valid across cases.
  void* Get(Role role);

  // (cols) f32 gain near 1 and a small bias, on pages of their own as the row tensors are: a framework's
  // parameters start on a cache line (PyTorch's CPU allocator aligns to 64 bytes). Off a line, every
  // vector read of them would straddle two, which one-row calls feel most (docs/perf-log.md, session 16).
  const float* weight() const { return static_cast<const float*>(weight_->data()); }
  const float* bias() const { return static_cast<const float*>(bias_->data()); }

  rmsnorm_dtype dtype() const { return dtype_; }
  Shape shape() const { return shape_; }

 private:
  rmsnorm_dtype dtype_ = RMSNORM_F32;
  Shape shape_;
  std::array<std::unique_ptr<Tensor>, kNumRoles> tensors_;
  std::unique_ptr<Tensor> weight_, bias_;
};

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_WORKSPACE_H_
