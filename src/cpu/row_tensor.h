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
    skip_ = outer_ - inner_rows_ * inner_;
    // ceil(2^64 / inner_rows): then row / inner_rows = (magic * row) >> 64 exactly for row < 2^32
    // (Lemire, Kaser and Kurz, "Faster remainder by direct computation", 2019).
    if (inner_rows_ > 1 && p.rows <= (int64_t{1} << 32)) magic_ = UINT64_MAX / uint64_t(inner_rows_) + 1;
  }

  T* data() const { return data_; }
  // The first element of row `row`. No division: a short row's whole work is a few times a 64-bit
  // divide's latency, and a row asks for its start several times.
  T* Row(int64_t row) const {
    if (inner_rows_ == 1) return data_ + row * outer_;
    const int64_t outer = magic_ != 0 ? int64_t((unsigned __int128)magic_ * uint64_t(row) >> 64) : row / inner_rows_;
    return data_ + row * inner_ + outer * skip_;  // = outer * outer_ + (row % inner_rows_) * inner_
  }

 private:
  T* data_ = nullptr;
  int64_t inner_rows_ = 1;
  int64_t outer_ = 0;
  int64_t inner_ = 0;
  int64_t skip_ = 0;     // outer_ - inner_rows_ * inner_: the gap after each outer row's inner rows
  uint64_t magic_ = 0;  // for the division by inner_rows; 0: divide
};

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_ROW_TENSOR_H_
