#include "tensor.h"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.hpp"

namespace rmsnorm_bench {
namespace {

constexpr size_t kPageBytes = 4096;
constexpr size_t kHugePageBytes = size_t{2} << 20;

uint64_t SplitMix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

float ValueAt(uint64_t seed, size_t i) {
  const double unit = double(SplitMix64(seed * 0x100000001B3ull + i) >> 11) * 0x1p-53;
  return float(unit * 4.0 - 1.75);
}

// fn(begin, end) over [0, n) split into contiguous ranges, one per hardware thread.
template <class Fn>
void ParallelRanges(size_t n, const Fn& fn) {
#pragma omp parallel num_threads(std::max(1, omp_get_num_procs()))
  {
    const size_t threads = size_t(omp_get_num_threads());
    const size_t per_thread = (n + threads - 1) / threads;
    const size_t begin = std::min(n, size_t(omp_get_thread_num()) * per_thread);
    const size_t end = std::min(n, begin + per_thread);
    if (begin < end) fn(begin, end);
  }
}

}  // namespace

void Tensor::Free::operator()(void* p) const { std::free(p); }

Tensor::Tensor(rmsnorm_dtype dtype, size_t elements, Pages pages) : dtype_(dtype), elements_(elements) {
  const size_t page = pages == Pages::kHuge ? kHugePageBytes : kPageBytes;
  const size_t rounded = (std::max<size_t>(1, bytes()) + page - 1) / page * page;
  void* p = std::aligned_alloc(page, rounded);
  if (p == nullptr) throw std::bad_alloc();
  storage_.reset(p);
  // Before the first touch, so that the kernel backs the range with huge pages where it can (a hint:
  // with transparent huge pages "never" it stays 4 KiB pages).
  if (pages == Pages::kHuge) madvise(p, rounded, MADV_HUGEPAGE);
  char* bytes_base = static_cast<char*>(p);
  ParallelRanges(rounded, [&](size_t begin, size_t end) { std::memset(bytes_base + begin, 0, end - begin); });
}

void Tensor::FillRandom(uint64_t seed) {
  ParallelRanges(elements_, [&](size_t begin, size_t end) {
    rmsnorm::registry::WithStorage(dtype_, [&](auto storage) {
      using Storage = decltype(storage);
      Storage* out = static_cast<Storage*>(data());
      for (size_t i = begin; i < end; ++i) out[i] = rmsnorm::registry::FromFloat<Storage>(ValueAt(seed, i));
    });
  });
}

}  // namespace rmsnorm_bench
