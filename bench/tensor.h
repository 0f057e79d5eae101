// A (rows, cols) array in one of the library's storage dtypes, page-aligned and first-touched before
// anything is timed, so no measurement pays for page faults.
#ifndef RMSNORM_BENCH_TENSOR_H_
#define RMSNORM_BENCH_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"

namespace rmsnorm_bench {

using rmsnorm::registry::DtypeName;  // the registry's, as everywhere
using rmsnorm::registry::DtypeSize;

class Tensor {
 public:
  // kHuge: aligned to 2 MiB and advised to use transparent huge pages (MADV_HUGEPAGE), as an allocator
  // that asks for them does (PyTorch's with THP_MEM_ALLOC_ENABLE=1); the default is 4 KiB pages.
  enum class Pages { kDefault, kHuge };
  // Zero-filled by all hardware threads, each writing the contiguous range a static split gives it.
  Tensor(rmsnorm_dtype dtype, size_t elements, Pages pages = Pages::kDefault);

  // Deterministic pseudo-random values in about [-1.75, 2.25), rounded to the dtype: no zeros, no
  // subnormals, a nonzero mean (so LayerNorm's centering is real work), nothing a rare-row path catches.
  void FillRandom(uint64_t seed);

  void* data() { return storage_.get(); }
  const void* data() const { return storage_.get(); }
  size_t elements() const { return elements_; }
  size_t bytes() const { return elements_ * DtypeSize(dtype_); }

 private:
  struct Free {
    void operator()(void* p) const;
  };
  rmsnorm_dtype dtype_;
  size_t elements_;
  std::unique_ptr<void, Free> storage_;
};

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_TENSOR_H_
