// A (rows, cols) tensor as the kernels address it: its rows where the call's layout puts them
// (runtime/problem.h), packed or strided.
#ifndef RMSNORM_SRC_CPU_ROW_TENSOR_H_
#define RMSNORM_SRC_CPU_ROW_TENSOR_H_

#include <cstdint>

#include "registry/registry.h"
#include "runtime/problem.h"

namespace rmsnorm::cpu {

template <class T>
class RowTensor {
 public:
  RowTensor() = default;
  // tensor: which of the call's row tensors `data` is (its layout); data may be null (absent).
  RowTensor(T* data, const Problem& p, registry::Tensor tensor) : data_(data) {
    if (!p.strided) {
      outer_ = p.cols;
      return;
    }
    inner_rows_ = p.inner_rows;
    outer_ = p.layout[tensor].outer;
    inner_ = p.layout[tensor].inner;
  }

  T* data() const { return data_; }
  // The first element of row `row`. Packed and one-level rows, the common cases, take no division.
  T* Row(int64_t row) const {
    if (inner_rows_ == 1) return data_ + row * outer_;
    const int64_t outer = row / inner_rows_;
    return data_ + outer * outer_ + (row - outer * inner_rows_) * inner_;
  }

 private:
  T* data_ = nullptr;
  int64_t inner_rows_ = 1;
  int64_t outer_ = 0;
  int64_t inner_ = 0;
};

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_ROW_TENSOR_H_
