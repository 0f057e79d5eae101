// Walking a row, compiled once per Highway target: loads and stores of any count, for the last vector
// of a range; the per-vector loops; and the output loop with the plan's memory hints (row_plan.h).
// Every kernel's loops go through these, so that all of them treat a row's tail, its streaming stores
// and its prefetches the same way, and a change to any of them is made once.

// Per-target include guard, the Highway way.
#if defined(RMSNORM_SRC_CPU_LOOPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RMSNORM_SRC_CPU_LOOPS_INL_H_
#undef RMSNORM_SRC_CPU_LOOPS_INL_H_
#else
#define RMSNORM_SRC_CPU_LOOPS_INL_H_
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cpu/convert-inl.h"
#include "cpu/dispatch.h"
#include "cpu/row_plan.h"
#include "cpu/row_tensor.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

// ---- Any count: the last vector of a range is read and written with masked moves on x86, elsewhere
// through a zero-padded buffer, so nothing beyond the range is ever read or written, and the tail is
// computed by the very same vector code ------------------------------------------------------------

constexpr size_t kMaxLanes = hn::MaxLanes(DF());

// Out of line and cold: the hot loops stay small enough to inline their per-vector bodies.
template <class T>
HWY_NOINLINE VF LoadPartial(DF d, const T* p, size_t count) {
  HWY_ALIGN T buffer[kMaxLanes] = {};
  std::memcpy(buffer, p, HWY_MIN(count, kMaxLanes) * sizeof(T));  // count < Lanes; the bound is for the compiler
  return LoadFull(d, buffer);
}

template <class T>
HWY_NOINLINE void StorePartial(DF d, VF v, T* p, size_t count) {
  HWY_ALIGN T buffer[kMaxLanes];
  StoreFull(d, v, buffer);
  std::memcpy(p, buffer, HWY_MIN(count, kMaxLanes) * sizeof(T));
}

#if RMSNORM_HAVE_MASKED_MOVES
// x86 has masked moves of 32-bit lanes only (before AVX-512): count 16-bit values move as whole
// 32-bit pairs under a mask, and an odd last one on its own. Nothing past count is touched.
using DU32Half = hn::Repartition<uint32_t, DU16>;

HWY_INLINE hn::Vec<DU16> LoadBits16Partial(const void* p, size_t count) {
  const DU16 du16;
  const DU32Half du32;
  const auto* bits = static_cast<const uint16_t*>(p);
  auto v = hn::BitCast(du16, hn::MaskedLoad(hn::FirstN(du32, count / 2), du32, static_cast<const uint32_t*>(p)));
  if (count % 2 != 0) {
    const auto last = hn::Eq(hn::Iota(du16, 0), hn::Set(du16, uint16_t(count - 1)));
    v = hn::IfThenElse(last, hn::Set(du16, bits[count - 1]), v);
  }
  return v;
}

HWY_INLINE void StoreBits16Partial(hn::Vec<DU16> v, void* p, size_t count) {
  const DU32Half du32;
  hn::BlendedStore(hn::BitCast(du32, v), hn::FirstN(du32, count / 2), du32, static_cast<uint32_t*>(p));
  if (count % 2 != 0) static_cast<uint16_t*>(p)[count - 1] = hn::ExtractLane(v, count - 1);
}

HWY_INLINE VF WidenBits(DF d, hn::Vec<DU16> bits, const hwy::bfloat16_t*) {
  return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(hn::RebindToUnsigned<DF>(), bits)));
}
HWY_INLINE VF WidenBits(DF d, hn::Vec<DU16> bits, const hwy::float16_t*) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(d, hn::BitCast(dh, bits));
}
HWY_INLINE hn::Vec<DU16> NarrowBits(DF d, VF v, const hwy::bfloat16_t*) { return Bf16Bits(d, v); }
HWY_INLINE hn::Vec<DU16> NarrowBits(DF d, VF v, const hwy::float16_t*) { return F16Bits(d, v); }
#endif

// Tails on x86 use the masked moves instead of the buffer: the buffer's small stores followed by a
// vector load cannot be forwarded, and with the calls that stall made a partial vector cost ~60 cycles
// (a 1024x100 backward, nine partial vectors per row, ran 3.5x as long as 1024x96).
template <class T>
HWY_INLINE VF Load(DF d, const T* p, size_t count) {
  if (HWY_LIKELY(count == hn::Lanes(d))) return LoadFull(d, p);
  if (count == 0) return hn::Zero(d);  // past a range's end (see CanonicalSums in sums-inl.h): p is not read
#if RMSNORM_HAVE_MASKED_MOVES
  if constexpr (std::is_same_v<T, float>) {
    return hn::MaskedLoad(hn::FirstN(d, count), d, p);
  } else if constexpr (sizeof(T) == 2) {
    return WidenBits(d, LoadBits16Partial(p, count), p);
  } else {  // a storage type of another size: the buffer
    return LoadPartial(d, p, count);
  }
#else
  return LoadPartial(d, p, count);
#endif
}

template <class T>
HWY_INLINE void Store(DF d, VF v, T* p, size_t count) {
  if (HWY_LIKELY(count == hn::Lanes(d))) return StoreFull(d, v, p);
#if RMSNORM_HAVE_MASKED_MOVES
  if constexpr (std::is_same_v<T, float>) {
    hn::BlendedStore(v, hn::FirstN(d, count), d, p);
  } else if constexpr (sizeof(T) == 2) {
    StoreBits16Partial(NarrowBits(d, v, p), p, count);
  } else {
    StorePartial(d, v, p, count);
  }
#else
  StorePartial(d, v, p, count);
#endif
}

// p[j, j + count's bits below 2 kGroup) = lanes[same]: a move of each power-of-two group of lanes
// that count holds, largest first.
template <size_t kGroup, class T>
HWY_INLINE void CopyLaneGroups(T* p, const T* lanes, size_t count, size_t j) {
  if constexpr (kGroup != 0) {
    if (count & kGroup) {
      std::memcpy(p + j, lanes + j, kGroup * sizeof(T));  // a constant size: one move
      j += kGroup;
    }
    CopyLaneGroups<kGroup / 2>(p, lanes, count, j);
  }
}

// The first `count` < Lanes(d) values of v to p with ordinary whole-lane moves, never a masked store:
// the unaligned head and the partial tail of a row whose middle goes out with streaming stores. On the
// Zen 4 a masked store among streaming ones stalls them, so rows written off a cache line's start ran
// far slower than aligned ones (docs/perf-log.md, session 26, has the figures). Out of line and cold,
// as StorePartial: inlined, it slowed the loops around it.
template <class T>
[[gnu::cold]] HWY_NOINLINE void StoreEdge(DF d, VF v, T* p, size_t count) {
  HWY_ALIGN T lanes[kMaxLanes];
  StoreFull(d, v, lanes);
  CopyLaneGroups<kMaxLanes / 2>(p, lanes, count, 0);  // count < Lanes <= kMaxLanes
}

// The per-vector lambdas handed to the loops below must inline into them (RMSNORM_INLINE_LAMBDA): a call
// per vector costs more than the vector's work, and GCC's size heuristics otherwise decline for the
// bf16/f16 bodies.

// Calls body(i, count) for i = 0, N, 2N, ... over [0, n): count is N = Lanes(d) except for a last,
// partial vector (0 < count < N). Unrolled by two, for the loop overhead; elementwise results do not
// depend on where a vector falls.
template <class Body>
HWY_INLINE void ForEachVector(DF d, size_t n, const Body& body) {
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    body(i, N);
    body(i + N, N);
  }
  if (i + N <= n) {
    body(i, N);
    i += N;
  }
  if (i < n) body(i, n - i);
}

// The same calls as ForEachVector, last vector first. An output pass that follows a reduction over the
// same row runs this way: it first meets the lines the reduction read last, which are still in L1 when
// the row's inputs, parameters and output together outgrow it (4096 f32 with a gain: 48 KiB).
template <class Body>
HWY_INLINE void ForEachVectorReversed(DF d, size_t n, const Body& body) {
  const size_t N = hn::Lanes(d);
  size_t i = n - n % N;
  if (i < n) body(i, n - i);
  for (; i >= 2 * N; i -= 2 * N) {
    body(i - N, N);
    body(i - 2 * N, N);
  }
  if (i != 0) body(0, N);
}

// How an output loop writes (see RowPlan): non-temporal stores for outputs larger than the last-level
// cache, prefetches of the next row's inputs so memory keeps streaming while this row computes from
// cache, and the order of the pass. None changes a result.
template <class T>
struct OutputHints {
  bool stream = false;
  bool stream_in_halves = false;  // where stream: f32 rows may take StreamInHalves (RowPlan::stream_in_halves)
  const T* prefetch_a = nullptr;  // indexed like the output; null for none
  const T* prefetch_b = nullptr;
  size_t prefetched = 0;  // columns whose prefetches an earlier pass issued (see HintsFor)
  bool into_l1 = false;   // the prefetches' lines go to L1 as well (RowPlan::prefetch_into_l1)
  bool reversed = false;  // last vector first: see ForEachVectorReversed
  bool align_output = false;  // rows in cache: whole vectors at addresses of out aligned to them (ForEachStep)
};

// A forward's output row in cache of at least this many bytes aligns its vectors to y (align_output)
// where it reads one parameter per column at most. A row off a vector's alignment (a std::vector, a
// NumPy array: 16 bytes past a line) otherwise splits a store across two lines at every vector on
// AVX-512, and in L1 or L2 those splits, more than the bytes, set the pace. Aligned to y, the gain's
// loads split instead, which costs less; the gain and a bias both, more. Shorter rows keep their
// splits: the masked head, and the masked tail it shifts, cost them more than they save. AVX-512's
// masked moves only: with AVX2's (vmaskmovps), such rows ran slower aligned than split on the Zen 4.
constexpr size_t kAlignedOutputMinBytes = 4096;
constexpr bool kAlignOutputs = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3;

// The hints for writing columns [c0, ...) of `row`: stream when the plan says so and the output is not
// also an input (in place, the line was just read into cache, where ordinary stores are cheapest), and
// prefetch the same columns of a row further down (RowPlan::prefetch_rows_ahead, at least
// `min_rows_ahead` and at most `max_rows_ahead`) of the inputs `a` and `b` (or null). Most kernels
// issue those prefetches from the output pass: their only other pass reads the row from L2, and
// prefetches issued there measured slower (RMSNorm's forward, 8192x4096 f32 on the Zen 5: 0.71 of the
// copy against 0.91). LayerNorm's forward issues them from a pass that reads L1 only (see its Reduce).
// A row that fits one reduction chunk and is not streamed from memory is written last vector first,
// right after its reductions; rows from memory go forward, so the next row's prefetches are issued in
// the order its reductions will read them, and a split row's chunks were reduced long before. So do
// grouped f32 rows, whose group stays in L1 whichever way (kGroupBytes): forward measured faster for
// them, from rows of 128 columns up, and slower for grouped bf16 rows (the commit says by how much).
// pRMSNorm's f32 forward, whose reduction reads only the first k columns, writes forward too (see
// RmsForwardKernel::OutputHintsFor).
template <class T>
HWY_INLINE OutputHints<T> HintsFor(const RowPlan& plan, bool in_place, int64_t row, int64_t c0,
                                   const RowTensor<const T>& a, const RowTensor<const T>* b = nullptr,
                                   int64_t max_rows_ahead = INT64_MAX, int64_t min_rows_ahead = 1) {
  OutputHints<T> hints;
  hints.stream = plan.stream_outputs && !in_place;
  hints.stream_in_halves = hints.stream && plan.stream_in_halves;
  if (plan.prefetch_rows_ahead != 0) {
    // Two inputs reach half as many rows down: kPrefetchAheadBytes counts every input prefetched.
    const int64_t ahead = b ? plan.prefetch_rows_ahead / 2 : plan.prefetch_rows_ahead;
    const int64_t rows_ahead = std::clamp<int64_t>(ahead, min_rows_ahead, max_rows_ahead);
    if (row + rows_ahead < plan.rows) {
      hints.prefetch_a = a.Row(row + rows_ahead) + c0;
      hints.prefetch_b = b ? b->Row(row + rows_ahead) + c0 : nullptr;
      hints.into_l1 = plan.prefetch_into_l1;
    }
  }
  hints.reversed = plan.num_chunks == 1 && plan.prefetch_rows_ahead == 0 && !hints.stream &&
                   (plan.group_rows == 1 || !std::is_same_v<T, float>);
  return hints;
}

// The hints for writing whole rows `row` and row + 1 in one pass (ForEachOutputPair). Each row prefetches
// at least two rows down, so that a pair prefetches the next pair rather than its own second row.
template <class T>
struct PairHints {
  OutputHints<T> first, second;
};

template <class T>
HWY_INLINE PairHints<T> PairHintsFor(const RowPlan& plan, bool in_place, int64_t row, const RowTensor<const T>& a,
                                     const RowTensor<const T>* b = nullptr) {
  return {HintsFor(plan, in_place, row, 0, a, b, INT64_MAX, 2),
          HintsFor(plan, in_place, row + 1, 0, a, b, INT64_MAX, 2)};
}

// A prefetch for reading of the line at p, into L1 as well as L2 or into L2 only (see
// RowPlan::prefetch_into_l1).
HWY_INLINE void PrefetchLine(const void* p, bool into_l1) {
  if (into_l1) {
    __builtin_prefetch(p, 0, 3);
  } else {
    __builtin_prefetch(p, 0, 2);
  }
}

// The hinted prefetches for a pass at column i: one per cache line (the lines are read on a later row),
// from the steps that start on a multiple of a line's elements, which a pass from column 0 meets.
template <class T>
HWY_INLINE void PrefetchNextRow(const OutputHints<T>& hints, size_t i) {
  constexpr size_t kLineElements = 64 / sizeof(T);
  if (hints.prefetch_a && i >= hints.prefetched && i % kLineElements == 0) {
    PrefetchLine(hints.prefetch_a + i, hints.into_l1);
    if (hints.prefetch_b) PrefetchLine(hints.prefetch_b + i, hints.into_l1);
  }
}

// The same for a step over columns [i, i + count) that may start anywhere: the step that holds the
// multiple issues its line's prefetch. After a streamed row's unaligned head (UnalignedHead) no step
// starts on one, and PrefetchNextRow would issue none for the whole row.
template <class T>
HWY_INLINE void PrefetchNextRowSpan(const OutputHints<T>& hints, size_t i, size_t count) {
  constexpr size_t kLineElements = 64 / sizeof(T);
  const size_t line = (i + kLineElements - 1) / kLineElements * kLineElements;
  if (line < i + count) PrefetchNextRow(hints, line);
}

// Prefetches rows [first, first + count) of the inputs `a` and `b` (or null), `cols` elements each:
// rows further down, ahead of their group (see RowPlan::group_prefetch_rows_ahead), into L1 as well
// where into_l1 (RowPlan::prefetch_into_l1).
template <class T>
HWY_INLINE void PrefetchInputRows(int64_t first, int64_t count, int64_t cols, bool into_l1,
                                  const RowTensor<const T>& a, const RowTensor<const T>* b = nullptr) {
  const auto lines = [&](const T* row) RMSNORM_INLINE_LAMBDA {
    const uintptr_t end = reinterpret_cast<uintptr_t>(row + cols);
    for (uintptr_t line = reinterpret_cast<uintptr_t>(row) & ~uintptr_t{63}; line < end; line += 64)
      PrefetchLine(reinterpret_cast<const void*>(line), into_l1);
  };
  for (int64_t row = first; row < first + count; ++row) {
    lines(a.Row(row));
    if (b) lines(b->Row(row));
  }
  // An effect GCC must keep. Its mod/ref analysis (GCC 12) takes a function that only prefetches for
  // one without effects, and dropped every call to this one (the disassembly showed no prefetch).
  asm volatile("");
}

// How an output loop's step stores its vector (StoreOutput).
enum class StoreKind {
  kCached,       // ordinary stores; a partial vector under a mask where the target has masked moves
  kStream,       // a whole vector at an address aligned to it: a streaming store
  kStreamedEdge  // the head or tail of a streamed row: ordinary stores, never a masked one (StoreEdge)
};

// The number of columns of `out` before its first address aligned to `unit_bytes`, at most n.
template <class T>
HWY_INLINE size_t ColumnsBeforeAligned(const T* out, size_t n, size_t unit_bytes) {
  const size_t misaligned = reinterpret_cast<uintptr_t>(out) % unit_bytes;
  return HWY_MIN(n, misaligned == 0 ? 0 : (unit_bytes - misaligned) / sizeof(T));
}

// A streamed output's head: calls step(i, count, StoreKind::kStreamedEdge) over the columns before
// out's first address aligned to `unit_bytes`, the streaming store's alignment, at most n. Returns their
// number.
template <class T, class Step>
HWY_INLINE size_t UnalignedHead(DF d, const T* out, size_t n, size_t unit_bytes, const Step& step) {
  const size_t head = ColumnsBeforeAligned(out, n, unit_bytes);
  ForEachVector(d, head,
                [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA { step(i, count, StoreKind::kStreamedEdge); });
  return head;
}

// Stores the first `count` values of v to p as `kind` says.
template <class T>
HWY_INLINE void StoreOutput(DF d, VF v, T* p, size_t count, StoreKind kind) {
  if (kind == StoreKind::kStream) return StoreStream(d, v, p);
  if (HWY_LIKELY(count == hn::Lanes(d))) return StoreFull(d, v, p);
  if (kind == StoreKind::kStreamedEdge) return StoreEdge(d, v, p, count);
  Store(d, v, p, count);
}

#if RMSNORM_HAVE_BF16_ZIP || RMSNORM_HAVE_NATIVE_BF16
// Rounds the 2N values of `first` and `second` to bf16 together (Bf16BitsTwo, Bf16BitsTwoNative) and
// stores them to p, with a streaming store where `stream`.
HWY_INLINE void StoreBf16Block(DF d, VF first, VF second, hwy::bfloat16_t* p, bool stream) {
#if RMSNORM_HAVE_BF16_ZIP
  const auto bits = Bf16BitsTwo(d, first, second);
#else
  (void)d;
  const auto bits = Bf16BitsTwoNative(first, second);
#endif
  const DU16Full du16;
  auto* out = reinterpret_cast<uint16_t*>(p);
  if (stream) {
    hn::Stream(bits, du16, out);
  } else {
    hn::StoreU(bits, du16, out);
  }
}

// ForEachOutput for bf16 on SSE4 and AVX2, where rounding is the bulk of a vector's work, and on AVX3
// where the CPU rounds (NativeBf16Rounding): whole blocks of 2N columns are rounded and stored together
// by block(i) (StoreBf16Block); a streamed row's unaligned head and the last < 2N columns take `step`,
// ForEachOutput's per-vector one. The order of the blocks follows the hints as in ForEachOutput; each
// column's value is the same either way. `out` sets the head's alignment.
template <class Block, class Step>
HWY_INLINE void ForEachBf16Steps(DF d, const hwy::bfloat16_t* out, size_t n, const OutputHints<hwy::bfloat16_t>& hints,
                                 const Block& block, const Step& step) {
  const size_t N = hn::Lanes(d);
  const size_t block_bytes = 2 * N * sizeof(uint16_t);
  const size_t head = hints.stream ? UnalignedHead(d, out, n, block_bytes, step) : 0;
  const size_t end = head + (n - head) / (2 * N) * (2 * N);
  const auto tail = [&]() RMSNORM_INLINE_LAMBDA {
    const StoreKind kind = hints.stream ? StoreKind::kStreamedEdge : StoreKind::kCached;
    for (size_t i = end; i < n; i += N) step(i, HWY_MIN(N, n - i), kind);
  };
  if (hints.reversed) {
    tail();
    for (size_t i = end; i > head; i -= 2 * N) block(i - 2 * N);
  } else {
    for (size_t i = head; i < end; i += 2 * N) block(i);
    tail();
  }
}
#endif

// Whether a bf16 output takes the blocks of ForEachBf16Steps on this target and CPU.
template <class T>
HWY_INLINE bool Bf16Blocks() {
#if RMSNORM_HAVE_BF16_ZIP
  return std::is_same_v<T, hwy::bfloat16_t>;
#elif RMSNORM_HAVE_NATIVE_BF16
  return std::is_same_v<T, hwy::bfloat16_t> && NativeBf16Rounding();
#else
  return false;
#endif
}

// Calls step(i, count, kind) for every vector of [0, n), as ForEachVector, in the order the hints
// give, streaming where they say so: ordinary stores up to the first address of `out` aligned to a
// vector, streaming ones through the aligned middle and ordinary ones for a partial last vector (the
// edges never masked: see StoreEdge). Where the hints say align_output and the target's masked moves
// are cheap (kAlignOutputs), rows in cache align their whole vectors to `out` as well.
template <class T, class Step>
HWY_INLINE void ForEachStep(DF d, const T* out, size_t n, const OutputHints<T>& hints, const Step& step) {
  const size_t N = hn::Lanes(d);
  if (!hints.stream) {
    const bool align = kAlignOutputs && hints.align_output;
    const size_t head = align ? ColumnsBeforeAligned(out, n, N * sizeof(T)) : 0;
    const auto cached = [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA {
      step(head + i, count, StoreKind::kCached);
    };
    if (hints.reversed) {
      ForEachVectorReversed(d, n - head, cached);
      if (head != 0) step(0, head, StoreKind::kCached);
    } else {
      if (head != 0) step(0, head, StoreKind::kCached);
      ForEachVector(d, n - head, cached);
    }
    return;
  }
  size_t i = UnalignedHead(d, out, n, N * sizeof(T), step);
  for (; i + N <= n; i += N) step(i, N, StoreKind::kStream);
  if (i < n) step(i, n - i, StoreKind::kStreamedEdge);
}

// Calls v = body(i, count) for every vector of [0, n), as ForEachVector, and stores v to out + i.
template <class T, class Body>
HWY_INLINE void ForEachOutput(DF d, T* out, size_t n, const OutputHints<T>& hints, const Body& body) {
  const auto step = [&](size_t i, size_t count, StoreKind kind) RMSNORM_INLINE_LAMBDA {
    PrefetchNextRowSpan(hints, i, count);
    StoreOutput(d, body(i, count), out + i, count, kind);
  };
#if RMSNORM_HAVE_BF16_ZIP || RMSNORM_HAVE_NATIVE_BF16
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    if (Bf16Blocks<T>()) {
      const size_t N = hn::Lanes(d);
      const auto block = [&](size_t i) RMSNORM_INLINE_LAMBDA {
        PrefetchNextRowSpan(hints, i, 2 * N);
        const VF first = body(i, N);
        StoreBf16Block(d, first, body(i + N, N), out + i, hints.stream);
      };
      return ForEachBf16Steps(d, out, n, hints, block, step);
    }
  }
#endif
  ForEachStep(d, out, n, hints, step);
}

// Two rows' outputs in one pass: body(i, count, v0, v1) sets v0 and v1 to columns [i, i + count) of
// rows 0 and 1, stored to out0 + i and out1 + i, with the order, the stores and each row's prefetches
// of ForEachOutput. What the rows share at a column (a gain, a parameter-gradient partial both add to)
// is then read once for both. False, with nothing written, where the rows lie at different offsets
// from a cache line (a stride that is not a whole number of lines): the pair shares the streamed head
// of the first row, so the caller writes such rows one at a time.
template <class T, class Body>
HWY_INLINE bool ForEachOutputPair(DF d, T* out0, T* out1, size_t n, const PairHints<T>& hints, const Body& body) {
  if ((reinterpret_cast<uintptr_t>(out1) - reinterpret_cast<uintptr_t>(out0)) % 64 != 0) return false;
  const OutputHints<T>& hints0 = hints.first;
  const OutputHints<T>& hints1 = hints.second;
  const auto step = [&](size_t i, size_t count, StoreKind kind) RMSNORM_INLINE_LAMBDA {
    PrefetchNextRowSpan(hints0, i, count);
    PrefetchNextRowSpan(hints1, i, count);
    VF v0, v1;
    body(i, count, v0, v1);
    StoreOutput(d, v0, out0 + i, count, kind);
    StoreOutput(d, v1, out1 + i, count, kind);
  };
#if RMSNORM_HAVE_BF16_ZIP || RMSNORM_HAVE_NATIVE_BF16
  if constexpr (std::is_same_v<T, hwy::bfloat16_t>) {
    if (Bf16Blocks<T>()) {
      const size_t N = hn::Lanes(d);
      const auto block = [&](size_t i) RMSNORM_INLINE_LAMBDA {
        PrefetchNextRowSpan(hints0, i, 2 * N);
        PrefetchNextRowSpan(hints1, i, 2 * N);
        VF first0, first1, second0, second1;
        body(i, N, first0, first1);
        body(i + N, N, second0, second1);
        StoreBf16Block(d, first0, second0, out0 + i, hints0.stream);
        StoreBf16Block(d, first1, second1, out1 + i, hints0.stream);
      };
      ForEachBf16Steps(d, out0, n, hints0, block, step);
      return true;
    }
  }
#endif
  ForEachStep(d, out0, n, hints0, step);
  return true;
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
