// Turning run-time choices (optional tensors) into template arguments, once per call, and the storage
// type a kernel file's compile holds (the dtype is chosen before, by which compile is called). The
// dispatchers and the lambdas given to them (RMSNORM_INLINE_LAMBDA) inline into one function per
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

// The dtypes by their Id in registry/dtypes.inc.
enum class DtypeId {
#define RMSNORM_DTYPE(Id, ...) Id,
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE
};

// Each kernel file (src/cpu/*_fwd.cc, *_bwd.cc) is compiled once per dtype, with RMSNORM_KERNEL_DTYPE
// set to its Id (CMakeLists.txt), and holds that dtype's instances only. Every dtype inlined into one
// function per target made the biggest files take minutes each to compile and left a 2-core build
// waiting on them; apart, the instances compile in parallel. The entry points of cpu.h choose among
// the files by dtype (dtype_dispatch.cc). RMSNORM_PER_KERNEL_DTYPE(Name) is a kernel file's name for
// its entry point: Name_F32 in the F32 compile. The per-target functions behind it are static, so that
// the compiles' names do not clash.
#define RMSNORM_PER_DTYPE_NAME_(name, id) name##_##id
#define RMSNORM_PER_DTYPE_NAME(name, id) RMSNORM_PER_DTYPE_NAME_(name, id)
#ifdef RMSNORM_KERNEL_DTYPE
#define RMSNORM_PER_KERNEL_DTYPE(name) RMSNORM_PER_DTYPE_NAME(name, RMSNORM_KERNEL_DTYPE)
#endif

// The kernels' storage type for a dtype: Highway's type of the same bits (the KernelStorage of
// registry/dtypes.inc).
template <DtypeId>
struct KernelStorageOf;
#define RMSNORM_DTYPE(Id, code, name, Storage, KernelStorage, ...) \
  template <>                                                    \
  struct KernelStorageOf<DtypeId::Id> {                          \
    using type = KernelStorage;                                  \
  };
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE

#ifdef RMSNORM_KERNEL_DTYPE
// The storage type of the dtype a kernel file's compile holds. The kernels take it as a template
// argument, so that no template instance has a different body in another dtype's compile.
using KernelDtypeStorage = KernelStorageOf<DtypeId::RMSNORM_KERNEL_DTYPE>::type;
#endif

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
