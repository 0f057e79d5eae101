// The forwards' f32 output loop for rows streamed to memory on x86 with 512-bit vectors, where a vector
// is a cache line: StreamInHalves writes y = normalize(x) * g (+ b) as ForEachForwardOutput does, but the
// aligned middle in half vectors: 256-bit loads, products and streaming stores, two iterations a line.
// Each column's operations are the same, so are its bits.
//
// Why: on the Zen 4, with one 512-bit iteration a line, the next-row prefetches that the output pass
// issues lost much of their effect, and the next row's first pass waited on memory. Written so, the
// f32 RMSNorm and LayerNorm forwards from memory ran far faster (the commits say by how much;
// docs/perf-log.md, sessions 27 and 28, has the bare loops behind it). The loop's shape matters as much
// as its width there: the same halves two to an iteration, a loop GCC did not rotate, or prefetches
// twice as fast (a line per iteration, LayerNorm) kept or worsened the wait, so a change to this loop
// needs the A/B again. Its prefetch test is PrefetchNextRow's, not PrefetchNextRowSpan's, for that
// reason: it takes rows whose y starts on a cache line only (StartsOnLine); after the unaligned head of
// any other row no half starts on a line and that test would issue no prefetch. Callers leave those rows
// to ForEachForwardOutput.

// Per-target include guard, the Highway way.
#if defined(RMSNORM_SRC_CPU_STREAM_HALVES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RMSNORM_SRC_CPU_STREAM_HALVES_INL_H_
#undef RMSNORM_SRC_CPU_STREAM_HALVES_INL_H_
#else
#define RMSNORM_SRC_CPU_STREAM_HALVES_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cpu/convert-inl.h"
#include "cpu/loops-inl.h"
#include "cpu/norm_math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

// Whether this target has StreamInHalves for rows of T.
template <class T>
constexpr bool kStreamInHalves = HWY_ARCH_X86 && std::is_same_v<T, float> && hn::MaxLanes(DF()) == 16;

HWY_INLINE bool StartsOnLine(DF d, const float* out) {
  return reinterpret_cast<uintptr_t>(out) % (hn::Lanes(d) * sizeof(float)) == 0;
}

// Whether the row chunk written to `out` with these hints takes StreamInHalves.
template <class T>
HWY_INLINE bool InHalves(const OutputHints<T>& hints, const T* out) {
  if constexpr (kStreamInHalves<T>) return hints.stream && StartsOnLine(DF(), out);
  (void)hints, (void)out;
  return false;
}

// y = normalize(dd, x) * g (+ b) over [0, n); normalize takes a vector of either width and its
// descriptor. It should read the row's statistics from locals: read through a reference, which the
// streaming stores may alias for all GCC knows, they were loaded and broadcast every iteration, which
// cost the RMSNorm forward 4%. w, b: the row chunk's gain and bias (or unused); hints: the output's.
template <bool kWeight, bool kBias, class Normalize>
HWY_INLINE void StreamInHalves(DF d, const float* in, float* out, size_t n, const float* w, const float* b,
                               const OutputHints<float>& hints, const Normalize& normalize) {
  HWY_DASSERT(StartsOnLine(d, out));
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::Half<DF> dh;
  const size_t H = hn::Lanes(dh);
  for (; i + H <= n; i += H) {
    PrefetchNextRow(hints, i);
    auto v = normalize(dh, hn::LoadU(dh, in + i));
    if constexpr (kWeight) v = hn::Mul(v, hn::LoadU(dh, w + i));
    if constexpr (kBias) v = hn::Add(v, hn::LoadU(dh, b + i));
    hn::Stream(v, dh, out + i);
  }
#endif
  if (i < n) {  // the partial tail, as ForEachStep writes it
    const size_t count = n - i;
    PrefetchNextRowSpan(hints, i, count);
    const VF v = ScaleShift<kWeight, kBias>(d, normalize(d, Load(d, in + i, count)), w, b, i, count);
    StoreOutput(d, v, out + i, count, StoreKind::kStreamedEdge);
  }
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
