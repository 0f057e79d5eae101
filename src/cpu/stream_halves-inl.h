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
// reason (the span test in the loop took 1.17-1.25x the time), so the loop takes chunks whose y starts
// on a line (StartsOnLine): a row that starts inside one (a std::vector, a NumPy array) goes through it
// from its first line on, its prefetch addresses shifted to match.
// Not on every CPU: on the Zen 5 whole vectors ran rows under 64 KiB faster (RowPlan::stream_in_halves).

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

// Whether the row chunk written to `out` with these hints takes StreamInHalves; with kLinesOnly, only
// where it starts on a line (LayerNorm's forward: its rows off a line measured slower in halves).
template <bool kLinesOnly = false, class T>
HWY_INLINE bool InHalves(const OutputHints<T>& hints, const T* out) {
  if constexpr (kStreamInHalves<T>) return hints.stream_in_halves && (!kLinesOnly || StartsOnLine(DF(), out));
  (void)hints, (void)out;
  return false;
}

// Columns [i, i + count) of a chunk as ForEachStep writes a streamed edge (the head before the first
// line, the partial tail): one vector, full width, with its next-row prefetch.
template <bool kWeight, bool kBias, class Normalize>
HWY_INLINE void StreamEdge(DF d, const float* in, float* out, const float* w, const float* b, size_t i, size_t count,
                           StoreKind kind, const OutputHints<float>& hints, const Normalize& normalize) {
  PrefetchNextRowSpan(hints, i, count);
  const VF v = ScaleShift<kWeight, kBias>(d, normalize(d, Load(d, in + i, count)), w, b, i, count);
  StoreOutput(d, v, out + i, count, kind);
}

// The loop itself, over a chunk whose y starts on a line.
template <bool kWeight, bool kBias, class Normalize>
HWY_INLINE void StreamLinesInHalves(DF d, const float* in, float* out, size_t n, const float* w, const float* b,
                                    const OutputHints<float>& hints, const Normalize& normalize) {
  HWY_DASSERT(StartsOnLine(d, out));
  size_t i = 0;
#if HWY_TARGET != HWY_SCALAR
  const hn::Half<DF> dh;
  const size_t H = hn::Lanes(dh);
  // Whole lines only: a streaming store of half a line, whose other half the next row's head then
  // writes with ordinary stores, costs a partial write to memory and the line's fetch besides. Rows
  // 32 or 48 bytes off a line, whose heads leave an odd number of halves, took 1.2-1.7x as long. The
  // empty asm hides from the compiler that the bound is a multiple of H: knowing it, GCC gave the loop
  // a tighter shape that ran rows 16 bytes off a line 1.09-1.15x as long.
  size_t lines_end = n / (2 * H) * (2 * H);
  asm("" : "+r"(lines_end));
  for (; i + H <= lines_end; i += H) {
    PrefetchNextRow(hints, i);
    auto v = normalize(dh, hn::LoadU(dh, in + i));
    if constexpr (kWeight) v = hn::Mul(v, hn::LoadU(dh, w + i));
    if constexpr (kBias) v = hn::Add(v, hn::LoadU(dh, b + i));
    hn::Stream(v, dh, out + i);
  }
#endif
  if (i < n) StreamEdge<kWeight, kBias>(d, in, out, w, b, i, n - i, StoreKind::kStreamedEdge, hints, normalize);
}

// y = normalize(dd, x) * g (+ b) over [0, n); normalize takes a vector of either width and its
// descriptor. It should read the row's statistics from locals: read through a reference, which the
// streaming stores may alias for all GCC knows, they were loaded and broadcast every iteration, which
// cost the RMSNorm forward 4%. w, b: the row chunk's gain and bias (or unused); hints: the output's.
// A chunk whose y starts inside a line writes the columns before the next line as ForEachStep writes
// a streamed head, then the rest from that line on, its prefetch addresses moved with it so that the
// loop's test (a multiple of a line's elements) meets every line.
template <bool kWeight, bool kBias, class Normalize>
HWY_INLINE void StreamInHalves(DF d, const float* in, float* out, size_t n, const float* w, const float* b,
                               const OutputHints<float>& hints, const Normalize& normalize) {
  // Rows on a line pass the caller's hints as they are: the loop compiled with a shifted copy of them
  // took another shape, which ran 2048x16384 1.17-1.33x as long (8192x4096 0.91-1.00).
  if (StartsOnLine(d, out)) return StreamLinesInHalves<kWeight, kBias>(d, in, out, n, w, b, hints, normalize);
  const size_t head = UnalignedHead(d, out, n, 64, [&](size_t i, size_t count, StoreKind kind) RMSNORM_INLINE_LAMBDA {
    StreamEdge<kWeight, kBias>(d, in, out, w, b, i, count, kind, hints, normalize);
  });
  OutputHints<float> shifted = hints;
  if (shifted.prefetch_a) shifted.prefetch_a += head;
  if (shifted.prefetch_b) shifted.prefetch_b += head;
  shifted.prefetched = hints.prefetched > head ? hints.prefetched - head : 0;
  if constexpr (kWeight) w += head;
  if constexpr (kBias) b += head;
  StreamLinesInHalves<kWeight, kBias>(d, in + head, out + head, n - head, w, b, shifted, normalize);
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
