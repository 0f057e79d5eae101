// bf16 forward outputs (and the fused add's sum) written two f32 vectors at a time. Without a bf16
// convert instruction (x86 before AVX512_BF16, and Highway 1.0.3 uses none), rounding each vector to
// bf16 and narrowing it costs more than the normalization itself: the bf16 forward was compute-bound
// at 0.6-0.8 of the stream bandwidth, and is at memory speed this way.
//
// One load of 2N bf16 values, viewed as N 32-bit lanes, holds the even columns in the low halves and
// the odd columns in the high halves: a shift and a mask widen them to two f32 vectors, instead of two
// widening loads; the two results are rounded in 32-bit lanes and merged with one 16-bit blend, instead
// of two narrowing packs and lane permutes. The gain and bias are read in the same even/odd order from
// a copy made once per call (PairedParams).
//
// The rounding here skips the per-vector NaN test. Adding the rounding increment is exact for a NaN
// whose low 16 bits are zero (they absorb it without a carry, and a NaN made by arithmetic is quiet
// already), and every NaN this arithmetic can make has them zero when its operands do: a NaN result is
// an operand NaN quieted (bit 22) or the default NaN. bf16 inputs widen with a zero low half and the
// statistics are finite (other rows go to the double path), so the one condition is a finite gain and
// bias, checked once per call. Calls without the copy (one row, a non-finite gain or bias, few rows
// whose copy would leave the cache) take the zipped path below on SSE4 and AVX2, ForEachOutput's
// two-vector rounding where the CPU rounds bf16 (loops-inl.h), the per-vector path elsewhere; the last
// < 2N columns of a row take the per-vector path. The bits written are the same on every path.

// Per-target include guard, the Highway way.
#if defined(RMSNORM_SRC_CPU_BF16_PAIRS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RMSNORM_SRC_CPU_BF16_PAIRS_INL_H_
#undef RMSNORM_SRC_CPU_BF16_PAIRS_INL_H_
#else
#define RMSNORM_SRC_CPU_BF16_PAIRS_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cpu/convert-inl.h"
#include "cpu/dispatch.h"
#include "cpu/loops-inl.h"
#include "cpu/norm_math-inl.h"
#include "hwy/highway.h"
#include "runtime/problem.h"
#include "runtime/scratch.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

// A single f32 lane has no halves to pair.
constexpr bool kHaveBf16Pairs = HWY_TARGET != HWY_SCALAR;

#if HWY_TARGET != HWY_SCALAR
// 2N bf16 values at p: the even ones as f32 in *even, the odd ones in *odd. Exact.
HWY_INLINE void LoadBf16Pair(DF d, const hwy::bfloat16_t* p, VF* even, VF* odd) {
  const DU32 du;
  const auto pair = hn::BitCast(du, hn::LoadU(DU16Full(), reinterpret_cast<const uint16_t*>(p)));
  *even = hn::BitCast(d, hn::ShiftLeft<16>(pair));
  *odd = hn::BitCast(d, hn::And(pair, hn::Set(du, 0xFFFF0000u)));
}

// The inverse: even's lanes rounded to bf16 in the even 16-bit lanes, odd's in the odd ones (see above
// for NaN: Bf16RoundedBits is also exact for a NaN with a zero low half). `native` is
// NativeBf16Rounding(), which ForEachBf16Pair reads once per row: read here, the atomic was a load and a
// test on every pair, and GCC kept both cases in one loop.
HWY_INLINE hn::Vec<DU16Full> Bf16PairBits(VF even, VF odd, bool native) {
  const DU16Full du16;
#if RMSNORM_HAVE_NATIVE_BF16
  // Even's encodings in the lower half, odd's in the upper (Bf16HalvesNative), then one permute
  // interleaves them.
  if (native && HWY_LIKELY(NativeRoundsBoth(even, odd))) {
    alignas(64) static constexpr uint16_t kInterleave[32] = {0, 16, 1, 17, 2,  18, 3,  19, 4,  20, 5,
                                                            21, 6, 22, 7, 23, 8, 24, 9, 25, 10, 26,
                                                            11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
    return hn::Vec<DU16Full>{
        _mm512_permutexvar_epi16(_mm512_load_si512(kInterleave), Bf16HalvesNative(even, odd).raw)};
  }
#else
  (void)native;
#endif
  const auto even_bits = hn::ShiftRight<16>(Bf16RoundedBits(even));
  return hn::OddEven(hn::BitCast(du16, Bf16RoundedBits(odd)), hn::BitCast(du16, even_bits));
}

// Those at p[0, 2N). Non-temporal when `stream`; p is then aligned to 2N * 2 bytes.
HWY_INLINE void StoreBf16Pair(VF even, VF odd, hwy::bfloat16_t* p, bool stream, bool native) {
  const DU16Full du16;
  const auto merged = Bf16PairBits(even, odd, native);
  auto* bits = reinterpret_cast<uint16_t*>(p);
  if (stream) {
    hn::Stream(merged, du16, bits);
  } else {
    hn::StoreU(merged, du16, bits);
  }
}
#endif

// The gain and bias of a bf16 forward in the order ForEachBf16Pair reads them: per block of 2N columns,
// the N even columns, then the N odd ones. Inactive (use the per-vector path) unless the call can take
// the paired path: see the top of this file. Built on the calling thread, into its scratch.
class PairedParams {
 public:
  static constexpr size_t kCachedCopyBytes = size_t{256} << 10;

  template <class T>
  PairedParams(const Problem& p, T* /* storage tag */, const float* gain, const float* bias) {
    if constexpr (!kHaveBf16Pairs || !std::is_same_v<T, hwy::bfloat16_t>) {
      (void)p, (void)gain, (void)bias;
    } else {
      const DF d;
      const size_t N = hn::Lanes(d);
      // One row gains nothing: the copy costs what the row saves. Beyond the cache the copy is memory
      // traffic on the calling thread, worth it only over many rows (4 x 262144 ran 2.2x slower).
      if (p.rows < 2 || size_t(p.cols) < 2 * N) return;
      const size_t copied_bytes = size_t(p.cols) * sizeof(float) * ((gain ? 1 : 0) + (bias ? 1 : 0));
      if (copied_bytes > kCachedCopyBytes && p.rows < 16) return;
      const size_t blocks = size_t(p.cols) / (2 * N);
      const size_t per_param = blocks * 2 * N;
      float* scratch = scratch_.Borrow(runtime::ScratchSlot::kPairedParams, 2 * per_param);
      if (gain && !Deinterleave(d, gain, blocks, scratch)) return;
      if (bias && !Deinterleave(d, bias, blocks, scratch + per_param)) return;
      gain_ = gain ? scratch : nullptr;
      bias_ = bias ? scratch + per_param : nullptr;
      active_ = true;
    }
  }

  bool active() const { return active_; }
  // (cols rounded down to 2N) f32 in pair order, or null when absent. Column c0 of a chunk (a multiple of
  // 2N) is at offset c0.
  const float* gain() const { return gain_; }
  const float* bias() const { return bias_; }

 private:
  // Writes src's 2N-blocks to dst in pair order; false if any value is not finite.
  template <class D>  // a template, so that targets without pairs never instantiate it
  static bool Deinterleave(D d, const float* src, size_t blocks, float* dst) {
#if HWY_TARGET == HWY_SCALAR
    (void)d, (void)src, (void)blocks, (void)dst;
    return false;
#else
    const size_t N = hn::Lanes(d);
    auto finite = hn::Set(d, 0.0f);  // stays 0 (not NaN) while every x - x is
    for (size_t b = 0; b < blocks; ++b) {
      const VF first = hn::LoadU(d, src + 2 * N * b), second = hn::LoadU(d, src + 2 * N * b + N);
      hn::StoreU(hn::ConcatEven(d, second, first), d, dst + 2 * N * b);
      hn::StoreU(hn::ConcatOdd(d, second, first), d, dst + 2 * N * b + N);
      finite = hn::Add(finite, hn::Add(hn::Sub(first, first), hn::Sub(second, second)));
    }
    return hn::AllTrue(d, hn::Eq(finite, hn::Zero(d)));
#endif
  }

  runtime::ScratchLease scratch_;
  bool active_ = false;
  const float* gain_ = nullptr;
  const float* bias_ = nullptr;
};

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
// ForEachBf16Pair's loop for a streamed row whose output starts `misalignment` bytes (a multiple of 4)
// past a line: a std::vector or a NumPy array starts 16 bytes past one. Its blocks of 2N columns then
// each straddle two lines, and without this the row went out with ordinary stores, which read every
// line of y from memory first and ran far slower than aligned rows (the commit says by how much). Each
// line is put together from two blocks in a register (one permute) and streamed; the part of the first
// block before the first line and the part of the last one after the last line go out as ordinary
// masked stores. The same values as the aligned loop, in the same places. AVX-512 only (n >= 2 blocks).
template <class Body>
HWY_INLINE size_t ForEachBf16PairStreamedOffLine(DF d, const hwy::bfloat16_t* in, hwy::bfloat16_t* out, size_t n,
                                                 size_t misalignment, const OutputHints<hwy::bfloat16_t>& hints,
                                                 const Body& body, bool native) {
  static_assert(hn::MaxLanes(DF()) == 16, "a block of 2N bf16 columns is one 64-byte line");
  constexpr size_t N = 16;
  const auto block = [&](size_t i) RMSNORM_INLINE_LAMBDA {
    PrefetchNextRow(hints, i);
    VF even, odd;
    LoadBf16Pair(d, in + i, &even, &odd);
    return Bf16PairBits(body(even, i), body(odd, i + N), native).raw;
  };
  // A line begins `head` bytes into each block: its first dword is dword `head / 4` of the earlier one.
  const size_t head = 64 - misalignment;
  const __m512i line_dwords = _mm512_add_epi32(_mm512_set1_epi32(int(head / 4)),
                                                _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  const __mmask32 head_words = __mmask32((uint64_t{1} << (head / 2)) - 1);
  __m512i previous = block(0);
  _mm512_mask_storeu_epi16(out, head_words, previous);
  size_t i = 2 * N;
  for (; i + 2 * N <= n; i += 2 * N) {
    const __m512i current = block(i);
    _mm512_stream_si512(reinterpret_cast<__m512i*>(reinterpret_cast<char*>(out + i) - misalignment),
                        _mm512_permutex2var_epi32(previous, line_dwords, current));
    previous = current;
  }
  _mm512_mask_storeu_epi16(out + i - 2 * N, __mmask32(~head_words), previous);
  return i;
}
#endif

// Calls y = body(x, j) for the columns [0, n rounded down to 2N) of one bf16 row, where x holds N of
// its columns as f32 (the even or the odd ones of a 2N-block) and j is where their gain and bias start
// in PairedParams' order (relative to the row's first column); stores y to out. Returns the number of
// columns written; the caller writes the rest with the per-vector path. Hints as for ForEachOutput.
template <class Body>
HWY_INLINE size_t ForEachBf16Pair(DF d, const hwy::bfloat16_t* in, hwy::bfloat16_t* out, size_t n,
                                  const OutputHints<hwy::bfloat16_t>& hints, const Body& body) {
#if HWY_TARGET == HWY_SCALAR
  (void)d, (void)in, (void)out, (void)n, (void)hints, (void)body;
  return 0;
#else
  const size_t N = hn::Lanes(d);
  // Streaming stores need an aligned vector; rows of an odd length shift the alignment row to row.
  const size_t misalignment = reinterpret_cast<uintptr_t>(out) % (2 * N * sizeof(uint16_t));
  const bool stream = hints.stream && misalignment == 0;
  const bool native = NativeBf16Rounding();
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  if (hints.stream && misalignment % 4 == 0 && n >= 4 * N && !stream)
    return ForEachBf16PairStreamedOffLine(d, in, out, n, misalignment, hints, body, native);
#endif
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    PrefetchNextRow(hints, i);
    VF even, odd;
    LoadBf16Pair(d, in + i, &even, &odd);
    StoreBf16Pair(body(even, i), body(odd, i + N), out + i, stream, native);
  }
  return i;
#endif
}

// ---- Rows without the even/odd copy: zipped blocks -------------------------------------------------
//
// Rows without the even/odd copy (see PairedParams: one row, where the copy costs what the row saves, a
// non-finite gain or bias, few rows whose copy would leave the cache) still go two vectors at a time,
// in zipped order, the order x86's 16-bit unpacks and packs use: per 128-bit block, `low` holds the
// block's first half of the 2N columns and `high` its second half. Widening is then one unpack per
// vector (the bf16 bits land in the upper half, zeros below) and narrowing one signed pack for both
// (no lane permute); the gain and bias are read in that order with one 128-bit block shuffle per
// vector. The rounding, NaN test included, is the per-vector path's, and each column's formula is
// the same: the same bits. SSE4 and AVX2 only (see convert-inl.h); other targets keep the per-vector
// path.
constexpr bool kHaveBf16Zip = RMSNORM_HAVE_BF16_ZIP;

#if RMSNORM_HAVE_BF16_ZIP
// The f32 values p[0, 2N) in zipped order.
HWY_INLINE void LoadZipped(DF d, const float* p, VF* low, VF* high) {
  const VF first = hn::LoadU(d, p), second = hn::LoadU(d, p + hn::Lanes(d));
  if constexpr (hn::MaxLanes(DF()) == 4) {
    *low = first;
    *high = second;
  } else {
    *low = hn::ConcatLowerLower(d, second, first);
    *high = hn::ConcatUpperUpper(d, second, first);
  }
}

// The inverse, rounded to bf16 as Bf16Bits: zipped order is the pack's order (see Bf16BitsPacked).
HWY_INLINE void StoreBf16Zipped(DF d, VF low, VF high, hwy::bfloat16_t* p) {
  const hn::Repartition<int16_t, DF> di16;
  hn::StoreU(Bf16BitsPacked(d, low, high), di16, reinterpret_cast<int16_t*>(p));
}
#endif

// Calls y = body(x, j, high) for the columns [0, n rounded down to 2N) of one bf16 row, where x holds
// the low or the high half (`high`) of the 2N columns at j in zipped order; stores y to out. Returns
// the number of columns written. Hints as for ForEachOutput, streaming excepted (the caller's).
template <class Body>
HWY_INLINE size_t ForEachBf16Zipped(DF d, const hwy::bfloat16_t* in, hwy::bfloat16_t* out, size_t n,
                                    const OutputHints<hwy::bfloat16_t>& hints, const Body& body) {
#if RMSNORM_HAVE_BF16_ZIP
  const size_t N = hn::Lanes(d);
  const size_t blocks = n / (2 * N);
  auto step = [&](size_t j) RMSNORM_INLINE_LAMBDA {
    PrefetchNextRow(hints, j);
    VF low, high;
    LoadBf16Zipped(d, in + j, &low, &high);
    StoreBf16Zipped(d, body(low, j, false), body(high, j, true), out + j);
  };
  if (hints.reversed) {
    for (size_t b = blocks; b-- > 0;) step(b * 2 * N);
  } else {
    for (size_t b = 0; b < blocks; ++b) step(b * 2 * N);
  }
  return blocks * 2 * N;
#else
  (void)d, (void)in, (void)out, (void)n, (void)hints, (void)body;
  return 0;
#endif
}

// v * g (+ b) for the low or high half of the 2N columns at j, in zipped order (see ScaleShift).
template <bool kWeight, bool kBias>
HWY_INLINE VF ScaleShiftZipped(DF d, VF v, const float* gain, const float* bias, size_t j, bool high) {
#if RMSNORM_HAVE_BF16_ZIP
  auto half = [&](const float* p) RMSNORM_INLINE_LAMBDA {
    VF low_half, high_half;
    LoadZipped(d, p + j, &low_half, &high_half);
    return high ? high_half : low_half;
  };
  if constexpr (kWeight && kBias) return hn::Add(hn::Mul(v, half(gain)), half(bias));
  if constexpr (kWeight) return hn::Mul(v, half(gain));
  if constexpr (kBias) return hn::Add(v, half(bias));
#endif
  (void)d, (void)gain, (void)bias, (void)j, (void)high;
  return v;
}

// A forward's output over columns [0, n) of a row chunk starting at column c0: y = normalize(x) * g
// (+ b), as ScaleShift; bf16 two vectors at a time (paired where `pairs` allows, else zipped where the
// target has it and the row is not streamed), the rest per vector. w and b are the chunk's gain and
// bias (or unused), as the per-vector path reads them.
template <bool kWeight, bool kBias, class T, class Normalize>
HWY_INLINE void ForEachForwardOutput(DF d, const T* in, T* out, size_t n, int64_t c0, const float* w,
                                     const float* b, const PairedParams& pairs, OutputHints<T> hints,
                                     const Normalize& normalize) {
  size_t done = 0;
  if constexpr (kHaveBf16Pairs && std::is_same_v<T, hwy::bfloat16_t>) {
    if (pairs.active()) {
      const float* pw = pairs.gain() + (kWeight ? c0 : 0);
      const float* pb = pairs.bias() + (kBias ? c0 : 0);
      done = ForEachBf16Pair(d, in, out, n, hints, [&](VF x, size_t j) RMSNORM_INLINE_LAMBDA {
        return ScaleShift<kWeight, kBias>(d, normalize(x), pw, pb, j, hn::Lanes(d));
      });
    } else if (kHaveBf16Zip && !hints.stream) {
      done = ForEachBf16Zipped(d, in, out, n, hints, [&](VF x, size_t j, bool high) RMSNORM_INLINE_LAMBDA {
        return ScaleShiftZipped<kWeight, kBias>(d, normalize(x), w, b, j, high);
      });
    }
    if (done != 0) hints = OutputHints<T>{};  // the few columns left need neither
  } else {
    (void)pairs, (void)c0;
  }
  if constexpr (!(kWeight && kBias)) {
    hints.align_output = !hints.stream && (n - done) * sizeof(T) >= kAlignedOutputMinBytes;
  }
  const auto output = [&](const OutputHints<T>& h) RMSNORM_INLINE_LAMBDA {
    ForEachOutput(d, out + done, n - done, h, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA {
      return ScaleShift<kWeight, kBias>(d, normalize(Load(d, in + done + i, count)), w, b, done + i, count);
    });
  };
  // A row that neither streams nor prefetches (a row in cache) runs a copy of the loop given hints
  // that say so at compile time. Read at run time, they cost pRMSNorm's rows a prefetch test at every
  // vector (a line test and a flag reloaded past the stores), and its f32 rows of 1024 in cache took
  // 1.1-1.4x the time (the commit says how much). Callers whose hints are constants (RunGroup's) keep
  // one loop.
  if (!hints.stream && hints.prefetch_a == nullptr) {
    OutputHints<T> cached;
    cached.reversed = hints.reversed;
    cached.align_output = hints.align_output;
    return output(cached);
  }
  output(hints);
}

// sum = a + b rounded to bf16 over [0, n rounded down to 2N), the fused residual add. Needs no
// condition: both operands are bf16 values, so the rounding is exact for every result (see above).
// Returns the number of elements written.
HWY_INLINE size_t AddBf16Pairs(DF d, const hwy::bfloat16_t* a, const hwy::bfloat16_t* b, hwy::bfloat16_t* sum,
                               size_t n) {
#if HWY_TARGET == HWY_SCALAR
  (void)d, (void)a, (void)b, (void)sum, (void)n;
  return 0;
#else
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    VF a_even, a_odd, b_even, b_odd;
    LoadBf16Pair(d, a + i, &a_even, &a_odd);
    LoadBf16Pair(d, b + i, &b_even, &b_odd);
    // The flag read per pair: read once, as ForEachBf16Pair does, this loop measured 3% slower.
    StoreBf16Pair(hn::Add(a_even, b_even), hn::Add(a_odd, b_odd), sum + i, false, NativeBf16Rounding());
  }
  return i;
#endif
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
