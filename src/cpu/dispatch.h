// Turning run-time choices (storage type, optional tensors) into template arguments, once per call.
// The dispatchers and the lambdas given to them (RMSNORM_INLINE_LAMBDA) inline into one function per
// call site: a decode row's whole call is a few hundred nanoseconds, and a frame per choice cost it
// some 65 instructions.
#ifndef RMSNORM_SRC_CPU_DISPATCH_H_
#define RMSNORM_SRC_CPU_DISPATCH_H_

#include <type_traits>

#include "hwy/base.h"
#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"

// A lambda that must inline into its caller, which GCC's size heuristics may otherwise decline.
#if defined(__GNUC__)
#define RMSNORM_INLINE_LAMBDA __attribute__((always_inline))
#else
#define RMSNORM_INLINE_LAMBDA
#endif

namespace rmsnorm::cpu {

// fn(T{}) with T the kernels' storage type for dtype: Highway's type of the same bits (the KernelStorage
// of registry/dtypes.inc).
template <class Fn>
HWY_INLINE void WithStorage(rmsnorm_dtype dtype, const Fn& fn) {
  switch (dtype) {
#define RMSNORM_DTYPE(Id, code, name, Storage, KernelStorage, ...) \
  case code:                                                     \
    return fn(KernelStorage{});
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE
  }
}

// The C++ storage type (include/rmsnorm/rmsnorm.hpp) of a kernel storage type: the same bits, with the
// scalar conversions; and its rmsnorm_dtype.
template <class KernelStorage>
struct StorageOf;
#define RMSNORM_DTYPE(Id, code, name, Storage, KernelStorage, ...) \
  template <>                                                    \
  struct StorageOf<KernelStorage> {                              \
    using type = Storage;                                        \
    static constexpr rmsnorm_dtype dtype = code;                 \
  };
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE

// fn(std::true_type{}) or fn(std::false_type{}).
template <class Fn>
HWY_INLINE void WithFlag(bool flag, const Fn& fn) {
  if (flag) return fn(std::true_type{});
  return fn(std::false_type{});
}

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_DISPATCH_H_
