// Turning run-time choices (storage type, optional tensors) into template arguments, once per call.
#ifndef RMSNORM_SRC_CPU_DISPATCH_H_
#define RMSNORM_SRC_CPU_DISPATCH_H_

#include <type_traits>

#include "hwy/base.h"
#include "rmsnorm/rmsnorm.h"

namespace rmsnorm::cpu {

// fn(T{}) with T the kernels' storage type for dtype.
template <class Fn>
void WithStorage(rmsnorm_dtype dtype, const Fn& fn) {
  switch (dtype) {
    case RMSNORM_F32: return fn(float{});
    case RMSNORM_BF16: return fn(hwy::bfloat16_t{});
    case RMSNORM_F16: return fn(hwy::float16_t{});
  }
}

// fn(std::true_type{}) or fn(std::false_type{}).
template <class Fn>
void WithFlag(bool flag, const Fn& fn) {
  if (flag) return fn(std::true_type{});
  return fn(std::false_type{});
}

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_DISPATCH_H_
