// SIMD building blocks shared by the kernels, compiled once per Highway target: loading and storing
// f32, bf16 and f16 rows as f32 vectors, partial vectors at the end of a range, and unrolled
// reductions.
//
// Conversions round to nearest even, keep NaN a quiet NaN and overflow to infinity on every target.
// (Highway 1.0.3 truncates bf16 and, without F16C, mishandles f16 infinities and NaN, so the
// conversions are ours; the public rmsnorm::bf16 / rmsnorm::f16 define the same rounding.)

// Per-target include guard, the Highway way.
#if defined(RMSNORM_SRC_CPU_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RMSNORM_SRC_CPU_SIMD_INL_H_
#undef RMSNORM_SRC_CPU_SIMD_INL_H_
#else
#define RMSNORM_SRC_CPU_SIMD_INL_H_
#endif

#include <cstddef>
#include <cstring>
#include <type_traits>

#include "cpu/dispatch.h"
#include "cpu/row_plan.h"
#include "cpu/statistics.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes: the canonical sums hold 16 partials (SVE wider than 512 bits runs at 512).
using DF = hn::CappedTag<float, 16>;
using VF = hn::Vec<DF>;

#undef RMSNORM_HAVE_F16C
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define RMSNORM_HAVE_F16C 1  // vcvtph2ps / vcvtps2ph: exact, round to nearest even
#else
#define RMSNORM_HAVE_F16C 0
#endif

#undef RMSNORM_HAVE_MASKED_MOVES
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
#define RMSNORM_HAVE_MASKED_MOVES 1  // vmaskmovps/vpmaskmovd, AVX-512 masks: lanes outside are untouched
#else
#define RMSNORM_HAVE_MASKED_MOVES 0
#endif

// ---- Full vectors: Lanes(DF) elements of storage type T <-> f32 lanes ----------------------------

HWY_INLINE VF LoadFull(DF d, const float* p) { return hn::LoadU(d, p); }
HWY_INLINE void StoreFull(DF d, VF v, float* p) { hn::StoreU(v, d, p); }

HWY_INLINE VF LoadFull(DF d, const hwy::bfloat16_t* p) {
  const hn::Rebind<hwy::bfloat16_t, DF> dbf;
  return hn::PromoteTo(d, hn::LoadU(dbf, p));  // a shift: exact
}

using DU16 = hn::Rebind<uint16_t, DF>;

using DU32 = hn::RebindToUnsigned<DF>;
using DI32 = hn::RebindToSigned<DF>;

// v's bits plus the round-to-nearest-even increment (0x7FFF and the lowest kept bit): the bf16
// encoding is the upper 16 bits. Exact for every non-NaN v, overflow to infinity included.
HWY_INLINE hn::Vec<DU32> Bf16RoundedBits(VF v) {
  const DU32 du;
  const auto bits = hn::BitCast(du, v);
  const auto lowest_kept = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  return hn::Add(bits, hn::Add(lowest_kept, hn::Set(du, 0x7FFFu)));
}

// The bf16 encodings of v's lanes, sign-extended to 32 bits (so that a signed saturating pack narrows
// them exactly). Any lane but a NaN.
HWY_INLINE hn::Vec<DI32> Bf16BitsWideNotNaN(VF v) { return hn::ShiftRight<16>(hn::BitCast(DI32(), Bf16RoundedBits(v))); }

// The same for every lane: a NaN keeps its sign and upper payload, made quiet.
HWY_INLINE hn::Vec<DI32> Bf16BitsWide(VF v) {
  const DI32 di;
  const auto quiet_nan = hn::Or(hn::ShiftRight<16>(hn::BitCast(di, v)), hn::Set(di, 0x0040));
  return hn::IfThenElse(hn::RebindMask(di, hn::IsNaN(v)), quiet_nan, Bf16BitsWideNotNaN(v));
}

// The same, narrowed: the bf16 encodings of v's lanes.
HWY_INLINE hn::Vec<DU16> Bf16Bits(DF /* d */, VF v) {
  return hn::BitCast(DU16(), hn::DemoteTo(hn::Rebind<int16_t, DF>(), Bf16BitsWide(v)));
}

using DU16Full = hn::Repartition<uint16_t, DF>;  // 2N lanes: one full vector of bf16

// Zipped order, x86's 16-bit unpack order: 2N columns as two f32 vectors, `low` holding the first half
// of every 128-bit block's columns and `high` the second half (see bf16_pairs-inl.h). Only on the
// targets where that order is known and tested: SSE4 (one block) and AVX2 (two; SSSE3 is not built).
#undef RMSNORM_HAVE_BF16_ZIP
#if HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_AVX2
#define RMSNORM_HAVE_BF16_ZIP 1

// 2N bf16 values at p as f32 in zipped order: one load and an unpack per vector. Exact.
HWY_INLINE void LoadBf16Zipped(DF d, const hwy::bfloat16_t* p, VF* low, VF* high) {
  const DU16Full du16;
  const DU32 du;
  const auto bits = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p));
  *low = hn::BitCast(d, hn::ZipLower(du, hn::Zero(du16), bits));
  *high = hn::BitCast(d, hn::ZipUpper(du, hn::Zero(du16), bits));
}
#else
#define RMSNORM_HAVE_BF16_ZIP 0
#endif

HWY_INLINE VF LoadFull(DF d, const hwy::float16_t* p) {
#if RMSNORM_HAVE_F16C
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(d, hn::LoadU(dh, p));
#else
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  const auto h = hn::PromoteTo(du, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p)));
  const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const auto exponent = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1Fu));
  const auto mantissa = hn::And(h, hn::Set(du, 0x3FFu));
  const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exponent, hn::Set(du, 112u))), hn::ShiftLeft<13>(mantissa));
  const auto inf_nan = hn::Or(hn::Set(du, 0x7F800000u), hn::ShiftLeft<13>(mantissa));
  // Zero and subnormals: mantissa * 2^-24, exact in f32.
  const auto subnormal = hn::BitCast(du, hn::Mul(hn::ConvertTo(d, hn::BitCast(di, mantissa)), hn::Set(d, 0x1p-24f)));
  const auto magnitude = hn::IfThenElse(hn::Eq(exponent, hn::Zero(du)), subnormal,
                                        hn::IfThenElse(hn::Eq(exponent, hn::Set(du, 31u)), inf_nan, normal));
  return hn::BitCast(d, hn::Or(sign, magnitude));
#endif
}

// The f16 encodings of v's lanes, rounded to nearest even.
HWY_INLINE hn::Vec<DU16> F16Bits(DF d, VF v) {
#if RMSNORM_HAVE_F16C
  (void)d;
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::BitCast(DU16(), hn::DemoteTo(dh, v));
#else
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const auto bits = hn::BitCast(du, v);
  const auto sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 0x8000u));
  const auto magnitude = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
  const auto signed_magnitude = hn::BitCast(di, magnitude);  // compare as int: magnitude < 2^31
  // Normal f16: rebias the exponent, round the 13 dropped bits to nearest even.
  const auto rebiased = hn::Sub(magnitude, hn::Set(du, 112u << 23));
  const auto normal = hn::ShiftRight<13>(
      hn::Add(rebiased, hn::Add(hn::Set(du, 0xFFFu), hn::And(hn::ShiftRight<13>(rebiased), hn::Set(du, 1u)))));
  // Subnormal f16: the value in units of 2^-24 (scaling is exact), rounded to nearest even; 1024
  // units is the smallest normal, whose encoding is 1024.
  const auto subnormal = hn::BitCast(du, hn::NearestInt(hn::Mul(hn::Abs(v), hn::Set(d, 16777216.0f))));
  const auto nan = hn::Or(hn::Set(du, 0x7E00u), hn::And(hn::ShiftRight<13>(magnitude), hn::Set(du, 0x3FFu)));
  auto result = hn::IfThenElse(hn::RebindMask(du, hn::Lt(signed_magnitude, hn::Set(di, 0x38800000))), subnormal, normal);
  result = hn::IfThenElse(hn::RebindMask(du, hn::Gt(signed_magnitude, hn::Set(di, 0x477FEFFF))), hn::Set(du, 0x7C00u), result);
  result = hn::IfThenElse(hn::RebindMask(du, hn::Gt(signed_magnitude, hn::Set(di, 0x7F800000))), nan, result);
  return hn::DemoteTo(DU16(), hn::BitCast(di, hn::Or(sign, result)));
#endif
}

HWY_INLINE void StoreFull(DF d, VF v, hwy::bfloat16_t* p) {
  hn::StoreU(Bf16Bits(d, v), DU16(), reinterpret_cast<uint16_t*>(p));
}
HWY_INLINE void StoreFull(DF d, VF v, hwy::float16_t* p) {
  hn::StoreU(F16Bits(d, v), DU16(), reinterpret_cast<uint16_t*>(p));
}

// Non-temporal: the line goes to memory without being read first. p is aligned to a stored vector.
// Only a register-wide vector streams: Highway 1.0.3 streams a half-width one (16-bit lanes of an
// SSE4 f32 vector, 8 bytes) as a full 16-byte store, past its end.
HWY_INLINE void StoreStream(DF d, VF v, float* p) { hn::Stream(v, d, p); }
template <class Bits>
HWY_INLINE void StreamBits(Bits bits, uint16_t* p) {
  if constexpr (hn::MaxLanes(DU16()) * sizeof(uint16_t) >= 16) {
    hn::Stream(bits, DU16(), p);
  } else {
    hn::StoreU(bits, DU16(), p);
  }
}
HWY_INLINE void StoreStream(DF d, VF v, hwy::bfloat16_t* p) {
  StreamBits(Bf16Bits(d, v), reinterpret_cast<uint16_t*>(p));
}
HWY_INLINE void StoreStream(DF d, VF v, hwy::float16_t* p) {
  StreamBits(F16Bits(d, v), reinterpret_cast<uint16_t*>(p));
}

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
  if (count == 0) return hn::Zero(d);  // past a range's end (see CanonicalSums): p is not read
#if RMSNORM_HAVE_MASKED_MOVES
  if constexpr (std::is_same_v<T, float>) {
    return hn::MaskedLoad(hn::FirstN(d, count), d, p);
  } else {
    return WidenBits(d, LoadBits16Partial(p, count), p);
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
  } else {
    StoreBits16Partial(NarrowBits(d, v, p), p, count);
  }
#else
  StorePartial(d, v, p, count);
#endif
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
  const T* prefetch_a = nullptr;  // indexed like the output; null for none
  const T* prefetch_b = nullptr;
  bool reversed = false;  // last vector first: see ForEachVectorReversed
};

// The hints for writing columns [c0, ...) of `row`: stream when the plan says so and the output is not
// also an input (in place, the line was just read into cache, where ordinary stores are cheapest), and
// prefetch the same columns of the next row of the inputs `a` and `b` (or null). A row that fits one
// reduction chunk and is not streamed from memory is written last vector first, right after its
// reductions; rows from memory go forward, so the next row's prefetches are issued in the order its
// reductions will read them, and a split row's chunks were reduced long before.
template <class T>
HWY_INLINE OutputHints<T> HintsFor(const RowPlan& plan, bool in_place, int64_t row, int64_t c0, const T* a,
                                   const T* b = nullptr) {
  OutputHints<T> hints;
  hints.stream = plan.stream_outputs && !in_place;
  if (plan.prefetch_rows && row + 1 < plan.rows) {
    const int64_t next = (row + 1) * plan.cols + c0;
    hints.prefetch_a = a + next;
    hints.prefetch_b = b ? b + next : nullptr;
  }
  hints.reversed = plan.num_chunks == 1 && !plan.prefetch_rows && !hints.stream;
  return hints;
}

// The hinted prefetches for an output loop at column i: one per cache line, into L2 (the lines are
// read on the next row).
template <class T>
HWY_INLINE void PrefetchNextRow(const OutputHints<T>& hints, size_t i) {
  constexpr size_t kLineElements = 64 / sizeof(T);
  if (hints.prefetch_a && i % kLineElements == 0) {
    __builtin_prefetch(hints.prefetch_a + i, 0, 2);
    if (hints.prefetch_b) __builtin_prefetch(hints.prefetch_b + i, 0, 2);
  }
}

// Calls v = body(i, count) for every vector of [0, n), as ForEachVector, and stores v to out + i.
template <class T, class Body>
HWY_INLINE void ForEachOutput(DF d, T* out, size_t n, const OutputHints<T>& hints, const Body& body) {
  auto step = [&](size_t i, size_t count, bool stream) RMSNORM_INLINE_LAMBDA {
    PrefetchNextRow(hints, i);
    const VF v = body(i, count);
    if (stream) {
      StoreStream(d, v, out + i);
    } else {
      Store(d, v, out + i, count);
    }
  };
  if (hints.reversed) {
    return ForEachVectorReversed(d, n, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA { step(i, count, false); });
  }
  if (!hints.stream) {
    return ForEachVector(d, n, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA { step(i, count, false); });
  }
  // Ordinary stores up to the first aligned vector, streaming ones through the aligned middle.
  const size_t N = hn::Lanes(d);
  const size_t vector_bytes = N * sizeof(T);
  const size_t misaligned = reinterpret_cast<uintptr_t>(out) % vector_bytes;
  const size_t head = HWY_MIN(n, misaligned == 0 ? 0 : (vector_bytes - misaligned) / sizeof(T));
  ForEachVector(d, head, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA { step(i, count, false); });
  size_t i = head;
  for (; i + N <= n; i += N) step(i, N, true);
  if (i < n) step(i, n - i, false);
}

// ---- Sums in one canonical order ----------------------------------------------------------------
//
// Every sum over a range [0, n) of a row chunk is taken in one order, fixed by the column index alone,
// so that every vector width performs exactly the same floating-point operations and gets the same
// bits (SCALAR, SSE4, AVX2, AVX3, NEON, SVE):
//   1. the range is cut into blocks of kSumBlock = 64 columns; the last is padded with zero columns
//      (each column's value is computed from zero inputs there, whatever the width);
//   2. a block's values v fold into 16: t_j = ((v_j + v_{j+16}) + v_{j+32}) + v_{j+48};
//   3. the blocks' t add into 16 running partials p_j, block after block;
//   4. the partials fold by halving, p_j += p_{j+h} for h = 8, 4, 2, 1; the sum is p_0.
// A target of N lanes holds the 16 partials in Q = 16 / N vectors. Each step is one rounding: values
// are computed without fused multiply-adds (the build has -ffp-contract=off, and no kernel calls
// MulAdd), since SSE4 and the scalar target have no FMA to match. The in-block fold gives each running
// add three adds of independent work, so one or two chains of adds cover their latency.
constexpr size_t kSumBlock = 64;
constexpr size_t kSumPartials = 16;

// The fold of step 4, in place over p[0, 16); returns p_0.
HWY_INLINE float FoldPartials(float* p) {
  for (size_t h = kSumPartials / 2; h != 0; h /= 2)
    for (size_t j = 0; j < h; ++j) p[j] = p[j] + p[j + h];
  return p[0];
}

// K = 1 or 2 sums at once: value(i, count, a, b) sets a (and b) to the values of columns [i, i + N)
// of the range, where count = min(N, n - i) columns lie inside it (0 past its end): columns past the
// range must get the values of zero inputs. Q = 16 / N. Targets with Q > 4 (the scalar one) keep 4
// vectors of partials in registers and make Q / 4 passes over the range, each for other partials.
// Each value body is inlined twice per vector of partials held, for whole blocks and for the last
// one (not once per column of the fold): every inlined copy adds to the kernels' compile time, under
// the sanitizers most.
template <size_t Q, size_t K, class Value>
HWY_INLINE void CanonicalSumsQ(DF d, size_t n, const Value& value, float* sums) {
  constexpr size_t N = kSumPartials / Q;
  constexpr size_t kHeld = Q < 4 ? Q : 4;
  HWY_ALIGN float partials[K][kSumPartials];
  const VF zero = hn::Zero(d);
  for (size_t q0 = 0; q0 < Q; q0 += kHeld) {
    VF a0 = zero, a1 = zero, a2 = zero, a3 = zero, b0 = zero, b1 = zero, b2 = zero, b3 = zero;
    // Adds t of partial vector q of the block at `base` into (acc_a, acc_b). `full` (std::true_type for
    // a block inside the range) makes every count N at compile time, so value's tail branches fold away.
    const auto fold = [&](size_t base, size_t q, auto full, VF& acc_a, VF& acc_b) RMSNORM_INLINE_LAMBDA {
      VF t_a = zero, t_b = zero;
      for (size_t k = 0; k < 4; ++k) {
        const size_t i = base + (q + k * Q) * N;
        VF a = zero, b = zero;
        value(i, decltype(full)::value ? N : (i >= n ? 0 : HWY_MIN(N, n - i)), a, b);
        t_a = k == 0 ? a : hn::Add(t_a, a);
        if constexpr (K == 2) t_b = k == 0 ? b : hn::Add(t_b, b);
      }
      acc_a = hn::Add(acc_a, t_a);
      if constexpr (K == 2) acc_b = hn::Add(acc_b, t_b);
    };
    const auto block = [&](size_t base, auto full) RMSNORM_INLINE_LAMBDA {
      fold(base, q0, full, a0, b0);
      if constexpr (kHeld >= 2) fold(base, q0 + 1, full, a1, b1);
      if constexpr (kHeld >= 4) {
        fold(base, q0 + 2, full, a2, b2);
        fold(base, q0 + 3, full, a3, b3);
      }
    };
    size_t base = 0;
    for (; base + kSumBlock <= n; base += kSumBlock) block(base, std::true_type{});
    if (base < n) block(base, std::false_type{});
    const auto store = [&](size_t j, VF acc_a, VF acc_b) RMSNORM_INLINE_LAMBDA {
      hn::Store(acc_a, d, partials[0] + (q0 + j) * N);
      if constexpr (K == 2) hn::Store(acc_b, d, partials[K - 1] + (q0 + j) * N);
    };
    store(0, a0, b0);
    if constexpr (kHeld >= 2) store(1, a1, b1);
    if constexpr (kHeld >= 4) {
      store(2, a2, b2);
      store(3, a3, b3);
    }
  }
  for (size_t k = 0; k < K; ++k) sums[k] = FoldPartials(partials[k]);
}

// Sums in the canonical order (see above) for this target's width.
template <size_t K, class Value>
HWY_INLINE void CanonicalSums(DF d, size_t n, const Value& value, float* sums) {
#if HWY_HAVE_SCALABLE
  // SVE's width is known at run time only; DF caps it at 16 lanes.
  switch (hn::Lanes(d)) {
    case 4: return CanonicalSumsQ<4, K>(d, n, value, sums);
    case 8: return CanonicalSumsQ<2, K>(d, n, value, sums);
    default: return CanonicalSumsQ<1, K>(d, n, value, sums);
  }
#else
  static_assert(kSumPartials % hn::MaxLanes(DF()) == 0, "the partials fill whole vectors");
  CanonicalSumsQ<kSumPartials / hn::MaxLanes(DF()), K>(d, n, value, sums);
#endif
}

// The sum of value(i, count, v) over [0, n), in the canonical order.
template <class Value>
HWY_INLINE float Sum(DF d, size_t n, const Value& value) {
  float sum;
  CanonicalSums<1>(
      d, n, [&](size_t i, size_t count, VF& a, VF&) RMSNORM_INLINE_LAMBDA { value(i, count, a); }, &sum);
  return sum;
}

// Two sums at once: value(i, count, a, b).
template <class Value>
HWY_INLINE void Sum2(DF d, size_t n, const Value& value, float* sum_a, float* sum_b) {
  float sums[2];
  CanonicalSums<2>(d, n, value, sums);
  *sum_a = sums[0];
  *sum_b = sums[1];
}

// sum of x_i^2 over [0, n). x[n, available) may be read and is ignored, so a range ending inside a
// vector (pRMSNorm's k) takes a full, masked load rather than the partial-vector path.
template <class T>
HWY_INLINE float SumSquares(const T* x, size_t n, size_t available) {
  const DF d;
  return Sum(d, n, [&](size_t i, size_t count, VF& square) RMSNORM_INLINE_LAMBDA {
    VF v;
    if (count == hn::Lanes(d)) {
      v = LoadFull(d, x + i);
    } else if (count != 0 && i + hn::Lanes(d) <= available) {
      v = hn::IfThenElseZero(hn::FirstN(d, count), LoadFull(d, x + i));
    } else {
      v = Load(d, x + i, count);
    }
    square = hn::Mul(v, v);
  });
}

// c in the lanes of the vector at i whose column is below `limit`, 0 in the others.
HWY_INLINE VF BelowLimit(DF d, VF c, size_t i, size_t limit) {
  if (i + hn::Lanes(d) <= limit) return c;
  if (i >= limit) return hn::Zero(d);
  return hn::IfThenElseZero(hn::FirstN(d, limit - i), c);
}

// Count, mean and M2 of x[0, n) by the corrected two-pass algorithm: a pass for an f32 estimate m of
// the mean, a second (from cache) for the sums of d = x - m and d^2; then mean = m + sum(d) / n and
// M2 = sum(d^2) - sum(d)^2 / n, which stays accurate when m is off by an ulp (large mean, small spread).
template <class T>
HWY_INLINE Moments ChunkMoments(const T* x, size_t n) {
  const DF d;
  const float sum =
      Sum(d, n, [&](size_t i, size_t count, VF& v) RMSNORM_INLINE_LAMBDA { v = Load(d, x + i, count); });
  const float estimate = static_cast<float>(double(sum) / double(n));
  const VF m = hn::Set(d, estimate);
  float sum_d, sum_d2;
  Sum2(
      d, n,
      [&](size_t i, size_t count, VF& deviation, VF& square) RMSNORM_INLINE_LAMBDA {
        deviation = hn::Sub(Load(d, x + i, count), m);
        if (count != hn::Lanes(d)) deviation = hn::IfThenElseZero(hn::FirstN(d, count), deviation);
        square = hn::Mul(deviation, deviation);
      },
      &sum_d, &sum_d2);
  Moments moments;
  moments.count = int64_t(n);
  moments.mean = double(estimate) + double(sum_d) / double(n);
  const double m2 = double(sum_d2) - double(sum_d) * double(sum_d) / double(n);
  moments.m2 = m2 < 0.0 ? 0.0 : m2;  // rounding can dip below 0; NaN stays NaN and marks the row rare
  return moments;
}

// (x - mean) as (x - hi) - lo, see SplitMean.
HWY_INLINE VF Centered(VF x, VF mean_hi, VF mean_lo) { return hn::Sub(hn::Sub(x, mean_hi), mean_lo); }

// The gain g_i (see EffectiveGain), or 1 without weights.
template <bool kWeight>
HWY_INLINE VF Gain(DF d, const float* gain, size_t i, size_t count) {
  if constexpr (kWeight) {
    return Load(d, gain + i, count);
  } else {
    (void)gain, (void)i, (void)count;
    return hn::Set(d, 1.0f);
  }
}

// v * g (+ b): the affine epilogue of every forward, rounded after the product and after the sum.
template <bool kWeight, bool kBias>
HWY_INLINE VF ScaleShift(DF d, VF v, const float* gain, const float* bias, size_t i, size_t count) {
  if constexpr (kWeight && kBias) return hn::Add(hn::Mul(v, Gain<true>(d, gain, i, count)), Load(d, bias + i, count));
  if constexpr (kWeight) return hn::Mul(v, Gain<true>(d, gain, i, count));
  if constexpr (kBias) return hn::Add(v, Load(d, bias + i, count));
  (void)gain, (void)bias, (void)i, (void)count;
  return v;
}

// Adds a vector into an f32 accumulator row (the parameter-gradient partials).
HWY_INLINE void AccumulateInto(DF d, VF v, float* p, size_t count) {
  Store(d, hn::Add(Load(d, p, count), v), p, count);
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
