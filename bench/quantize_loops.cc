// Per-target loops for the quantized figure (quantize_loops.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quantize_loops.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include <algorithm>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "cpu/quantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

using quantize_detail::kCanStreamBytes;
using quantize_detail::StreamBytes;

void QuantizeInt8RowRange(const float* y, int64_t begin, int64_t end, int64_t cols, int8_t* q, float* scales) {
  for (int64_t r = begin; r < end; ++r) QuantizeInt8Row(y + r * cols, cols, q + r * cols, scales + r);
}

// Elements [begin, end) of x to q, q[i] = int(x[i]) saturated to a byte; begin a multiple of 64.
void NarrowingCopyRange(const float* x, size_t begin, size_t end, uint8_t* q, bool nontemporal) {
  const DF d;
  const DI32 di;
  const hn::Rebind<uint8_t, DF> d8;
  const size_t N = hn::Lanes(d);
  size_t i = begin;
  for (; i + N <= end; i += N) {
    const auto bytes = hn::DemoteTo(d8, hn::ConvertTo(di, hn::LoadU(d, x + i)));
    if constexpr (kCanStreamBytes<decltype(d8)>) {
      if (nontemporal) {
        StreamBytes(d8, bytes, q + i);
        continue;
      }
    }
    hn::StoreU(bytes, d8, q + i);
  }
  for (; i < end; ++i) q[i] = uint8_t(std::clamp(int32_t(x[i]), 0, 255));
  if (nontemporal) hwy::FlushStream();
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <omp.h>

#include "quantize_loops.h"

namespace rmsnorm::cpu {
HWY_EXPORT(QuantizeInt8RowRange);
HWY_EXPORT(NarrowingCopyRange);
}  // namespace rmsnorm::cpu

namespace rmsnorm_bench {

void QuantizeInt8Rows(const float* y, int64_t rows, int64_t cols, int8_t* q, float* scales, int threads) {
#pragma omp parallel num_threads(std::max(threads, 1))
  {
    const int64_t per_thread = (rows + omp_get_num_threads() - 1) / omp_get_num_threads();
    const int64_t begin = std::min(rows, omp_get_thread_num() * per_thread), end = std::min(rows, begin + per_thread);
    HWY_DYNAMIC_DISPATCH(rmsnorm::cpu::QuantizeInt8RowRange)(y, begin, end, cols, q, scales);
  }
}

void NarrowingCopy(const float* x, size_t n, uint8_t* q, StreamStores stores, int threads) {
  const bool nontemporal = stores == StreamStores::kNonTemporal;
#pragma omp parallel num_threads(std::max(threads, 1))
  {
    const size_t per_thread = (n + size_t(omp_get_num_threads()) - 1) / size_t(omp_get_num_threads());
    const size_t chunk = (per_thread + 63) / 64 * 64;  // whole lines of q per thread
    const size_t begin = std::min(n, size_t(omp_get_thread_num()) * chunk), end = std::min(n, begin + chunk);
    if (begin < end) HWY_DYNAMIC_DISPATCH(rmsnorm::cpu::NarrowingCopyRange)(x, begin, end, q, nontemporal);
  }
}

}  // namespace rmsnorm_bench
#endif  // HWY_ONCE
