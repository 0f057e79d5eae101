// The sums every f32-path row statistic is made of, compiled once per Highway target, in one canonical
// order (below) that makes every vector width compute the same bits. Kept in a file of its own: this
// order is what the same-bits promise rests on (tests/same_bits_test.cc records its hash).

// Per-target include guard, the Highway way.
#if defined(RMSNORM_SRC_CPU_SUMS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RMSNORM_SRC_CPU_SUMS_INL_H_
#undef RMSNORM_SRC_CPU_SUMS_INL_H_
#else
#define RMSNORM_SRC_CPU_SUMS_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "cpu/convert-inl.h"
#include "cpu/dispatch.h"
#include "cpu/loops-inl.h"
#include "cpu/statistics.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

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

// Step 4 in registers, on the targets of a fixed width N = 16 / Q <= 16 lanes, with the partials
// q * N + lane in a0..a3: the additions of FoldPartials, operand for operand (p_j + p_{j+h}), without
// the trip through memory and a scalar add per partial. A short row's whole statistic is a few vectors,
// and this fold was a fair part of its time.
#undef RMSNORM_FOLD_IN_REGISTERS
#if !HWY_HAVE_SCALABLE && HWY_TARGET != HWY_SCALAR
#define RMSNORM_FOLD_IN_REGISTERS 1

// p_j += p_{j+h} for h = N/2, ..., 1 within one vector; returns p_0.
template <class D>
HWY_INLINE float FoldLanes(D d, hn::Vec<D> v) {
  if constexpr (hn::MaxLanes(d) == 1) {
    return hn::GetLane(v);
  } else {
    const hn::Half<D> dh;
    return FoldLanes(dh, hn::Add(hn::LowerHalf(dh, v), hn::UpperHalf(dh, v)));
  }
}

template <size_t Q>
HWY_INLINE float FoldVectors(DF d, VF a0, VF a1, VF a2, VF a3) {
  static_assert(Q == 1 || Q == 2 || Q == 4, "16 partials in 1, 2 or 4 vectors");
  if constexpr (Q == 4) {  // h = 8 = 2N
    a0 = hn::Add(a0, a2);
    a1 = hn::Add(a1, a3);
  }
  if constexpr (Q >= 2) a0 = hn::Add(a0, a1);  // h = 8 = N (Q = 2) or h = 4 = N (Q = 4)
  (void)a1, (void)a2, (void)a3;
  return FoldLanes(d, a0);
}
#else
#define RMSNORM_FOLD_IN_REGISTERS 0
#endif

// K = 1 or 2 sums at once: value(i, count, a, b) sets a (and b) to the values of columns [i, i + N)
// of the range, where count = min(N, n - i) columns lie inside it (0 past its end): columns past the
// range must get the values of zero inputs. Q = 16 / N. Targets with Q > 4 (the scalar one) keep 4
// vectors of partials in registers and make Q / 4 passes over the range, each for other partials.
// Each value body is inlined twice per vector of partials held, for whole blocks and for the last
// one (not once per column of the fold): every inlined copy adds to the kernels' compile time, under
// the sanitizers most.
template <size_t Q, size_t K, bool kTail, class Value>
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
    if constexpr (kTail) {
      if (base < n) block(base, std::false_type{});
    }
#if RMSNORM_FOLD_IN_REGISTERS
    if constexpr (Q <= 4) {  // every partial is held: one pass, folded where it is
      sums[0] = FoldVectors<Q>(d, a0, a1, a2, a3);
      if constexpr (K == 2) sums[1] = FoldVectors<Q>(d, b0, b1, b2, b3);
      return;
    }
#endif
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

// Sums in the canonical order (see above) for this target's width. Without kTail, n must be a multiple
// of kSumBlock: the padded last block and its set-up are left out.
template <size_t K, bool kTail, class Value>
HWY_INLINE void CanonicalSums(DF d, size_t n, const Value& value, float* sums) {
#if HWY_HAVE_SCALABLE
  // SVE's width is known at run time only; DF caps it at 16 lanes.
  switch (hn::Lanes(d)) {
    case 4: return CanonicalSumsQ<4, K, kTail>(d, n, value, sums);
    case 8: return CanonicalSumsQ<2, K, kTail>(d, n, value, sums);
    default: return CanonicalSumsQ<1, K, kTail>(d, n, value, sums);
  }
#else
  static_assert(kSumPartials % hn::MaxLanes(DF()) == 0, "the partials fill whole vectors");
  CanonicalSumsQ<kSumPartials / hn::MaxLanes(DF()), K, kTail>(d, n, value, sums);
#endif
}

// The sum of value(i, count, v) over [0, n), in the canonical order; without kTail, n is a multiple of
// kSumBlock (see CanonicalSums).
template <bool kTail = true, class Value>
HWY_INLINE float Sum(DF d, size_t n, const Value& value) {
  float sum;
  CanonicalSums<1, kTail>(
      d, n, [&](size_t i, size_t count, VF& a, VF&) RMSNORM_INLINE_LAMBDA { value(i, count, a); }, &sum);
  return sum;
}

// Two sums at once: value(i, count, a, b).
template <class Value>
HWY_INLINE void Sum2(DF d, size_t n, const Value& value, float* sum_a, float* sum_b) {
  float sums[2];
  CanonicalSums<2, true>(d, n, value, sums);
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

// SumSquares of a range of whole blocks, n a multiple of kSumBlock (head_dim-sized rows): the same
// operations without the padded last block, whose set-up was a fair part of a short row's sum.
template <class T>
HWY_INLINE float SumSquaresOfBlocks(const T* x, size_t n) {
  HWY_DASSERT(n % kSumBlock == 0);
  const DF d;
  return Sum<false>(d, n, [&](size_t i, size_t, VF& square) RMSNORM_INLINE_LAMBDA {
    const VF v = LoadFull(d, x + i);
    square = hn::Mul(v, v);
  });
}

// Count, mean and M2 of x[0, n) by the corrected two-pass algorithm: a pass for an f32 estimate m of
// the mean, a second (from cache) for the sums of d = x - m and d^2; then mean = m + sum(d) / n and
// M2 = sum(d^2) - sum(d)^2 / n, which stays accurate when m is off by an ulp (large mean, small spread).
// The second pass also issues the next-row prefetches of `hints`, if any (see LayerNormForwardKernel).
// The two passes are also callable alone (a group of short rows takes each for all its rows in turn).
template <class T>
HWY_INLINE float ChunkMeanEstimate(const T* x, size_t n) {
  const DF d;
  const float sum =
      Sum(d, n, [&](size_t i, size_t count, VF& v) RMSNORM_INLINE_LAMBDA { v = Load(d, x + i, count); });
  return static_cast<float>(DivideBy(double(sum), int64_t(n)));
}

template <class T>
HWY_INLINE Moments ChunkMomentsAbout(const T* x, size_t n, float estimate, const OutputHints<T>& hints = {}) {
  const DF d;
  const VF m = hn::Set(d, estimate);
  float sum_d, sum_d2;
  Sum2(
      d, n,
      [&](size_t i, size_t count, VF& deviation, VF& square) RMSNORM_INLINE_LAMBDA {
        if (i < n) PrefetchNextRow(hints, i);
        deviation = hn::Sub(Load(d, x + i, count), m);
        if (count != hn::Lanes(d)) deviation = hn::IfThenElseZero(hn::FirstN(d, count), deviation);
        square = hn::Mul(deviation, deviation);
      },
      &sum_d, &sum_d2);
  Moments moments;
  moments.count = int64_t(n);
  moments.mean = double(estimate) + DivideBy(double(sum_d), int64_t(n));
  const double m2 = double(sum_d2) - DivideBy(double(sum_d) * double(sum_d), int64_t(n));
  moments.m2 = m2 < 0.0 ? 0.0 : m2;  // rounding can dip below 0; NaN stays NaN and marks the row rare
  return moments;
}

template <class T>
HWY_INLINE Moments ChunkMoments(const T* x, size_t n, const OutputHints<T>& hints = {}) {
  return ChunkMomentsAbout(x, n, ChunkMeanEstimate(x, n), hints);
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
