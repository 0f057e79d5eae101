// Quantizing a finished f32 row y (a forward's normalized output) to int8 with one scale per row, to
// fp8 E4M3 with a dynamic or static scale, or to ggml's q8_0 blocks, compiled once per Highway target.
// The formats are defined in ref/quant_formats.h, and ref/quantize.h is the reference these follow.
//
// Every target writes the same bytes: every floating-point operation is one that IEEE rounds correctly
// (max as an integer compare; no fused multiply-add; rounding to an integer or a step by adding a power
// of two, nearest even), a value is the rounding of the correctly rounded f32 quotient y / scale, and a
// row's last partial vector runs through the same vector code on a zero-padded copy. The quotient is
// taken as y * (1 / scale), which is within three f32 roundings of it, and a vector where that product
// lies so close to a rounding midpoint of the format that the two could round apart divides instead
// (see Int8Values and E4M3Bits): a division per element cost more than reading the row. The reference
// divides in double; these round the f32 quotient, so where y / scale lies within f32 rounding of a
// rounding midpoint a value may be one step from the reference's.

// Per-target include guard, the Highway way.
#if defined(RMSNORM_SRC_CPU_QUANTIZE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RMSNORM_SRC_CPU_QUANTIZE_INL_H_
#undef RMSNORM_SRC_CPU_QUANTIZE_INL_H_
#else
#define RMSNORM_SRC_CPU_QUANTIZE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include "cpu/convert-inl.h"
#include "cpu/norm_math-inl.h"
#include "hwy/highway.h"
#include "ref/quant_formats.h"
#include "rmsnorm/rmsnorm.hpp"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {
namespace quantize_detail {

using DI8 = hn::Rebind<int8_t, DF>;
using DU8 = hn::Rebind<uint8_t, DF>;
constexpr size_t kMaxQuantLanes = hn::MaxLanes(DF());
constexpr uint32_t kInfinityBits = 0x7F800000u;

// fn(i, count) for consecutive vectors over [0, n): count is Lanes(DF) but in the last, partial one.
template <class Fn>
HWY_INLINE void ForEachVectorOf(size_t n, const Fn& fn) {
  const size_t lanes = hn::Lanes(DF());
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) fn(i, lanes);
  if (i < n) fn(i, n - i);
}

// count values at p; lanes past count are zero, which no maximum or quotient below notices.
HWY_INLINE VF LoadUpTo(DF d, const float* p, size_t count) {
  if (HWY_LIKELY(count == hn::Lanes(d))) return hn::LoadU(d, p);
  HWY_ALIGN float buffer[kMaxQuantLanes] = {};
  std::memcpy(buffer, p, HWY_MIN(count, kMaxQuantLanes) * sizeof(float));  // the bound is for the compiler
  return hn::Load(d, buffer);
}

// The first count lanes of v to p; nothing past them is written.
template <class D>
HWY_INLINE void StoreUpTo(D d, hn::Vec<D> v, hn::TFromD<D>* p, size_t count) {
  if (HWY_LIKELY(count == hn::Lanes(d))) return hn::StoreU(v, d, p);
  HWY_ALIGN hn::TFromD<D> buffer[kMaxQuantLanes];
  hn::Store(v, d, buffer);
  std::memcpy(p, buffer, HWY_MIN(count, kMaxQuantLanes) * sizeof(*p));
}

// A whole vector of bytes to p with a non-temporal store (the line goes to memory without being read
// first); p is aligned to the vector's size. Highway 1.0.3 streams a vector narrower than 16 bytes as a
// full 16-byte store, past its end and misaligned, so the narrower byte vectors of AVX2 (8 bytes) and
// SSE4 (4) go out through MOVNTI from a general register instead. kCanStreamBytes: whether this
// target has such a store at all (the scalar one does not).
template <class D>
constexpr size_t kVectorBytes = hn::MaxLanes(D()) * sizeof(hn::TFromD<D>);
template <class D>
constexpr bool kCanStreamBytes =
    HWY_ARCH_X86_64 && (kVectorBytes<D> == 16 || kVectorBytes<D> == 8 || kVectorBytes<D> == 4);

template <class D>
HWY_INLINE void StreamBytes(D d, hn::Vec<D> v, hn::TFromD<D>* p) {
  constexpr size_t kBytes = kVectorBytes<D>;
  static_assert(kCanStreamBytes<D>, "a target with a non-temporal store of this width");
#if HWY_ARCH_X86_64
  if constexpr (kBytes == 16) {
    hn::Stream(v, d, p);
  } else if constexpr (kBytes == 8) {
    const hn::Repartition<uint64_t, D> d64;
    _mm_stream_si64(reinterpret_cast<long long*>(p), static_cast<long long>(hn::GetLane(hn::BitCast(d64, v))));
  } else {
    const hn::Repartition<uint32_t, D> d32;
    _mm_stream_si32(reinterpret_cast<int*>(p), static_cast<int>(hn::GetLane(hn::BitCast(d32, v))));
  }
#else
  (void)d, (void)v, (void)p;
#endif
}

// A row's quantized bytes to q + i: the first count lanes of v. stream: a call whose outputs outgrow
// the cache (RowPlan::stream_outputs) and a q 16-byte aligned; whole vectors then go out as
// non-temporal stores where the target has one (StreamBytes).
template <class D>
HWY_INLINE void StoreBytes(D d, hn::Vec<D> v, hn::TFromD<D>* q, size_t i, size_t count, bool stream) {
  if constexpr (kCanStreamBytes<D>) {
    if (stream && count == hn::Lanes(d)) return StreamBytes(d, v, q + i);
  }
  (void)stream;
  StoreUpTo(d, v, q + i, count);
}

// The default of the quantizers' before_vector: before_vector(i, count) runs before the vector of
// columns [i, i + count) of a row is quantized, each column once and in order, for work the caller
// spreads over the row (the quantized forward's next-row prefetches: see RmsForwardQuantizedKernel).
// The loops below call a copy of it of their own: GCC reloaded the caller's object, which the stores
// of quantized bytes may alias, for every vector.
struct NothingBeforeVector {
  HWY_INLINE void operator()(size_t, size_t) const {}
};

// 1 / scale is normal (and correctly rounded) only for normal scales up to 2^126.
HWY_INLINE bool ReciprocalIsNormal(float scale) {
  const float magnitude = std::fabs(scale);
  return magnitude >= std::numeric_limits<float>::min() && magnitude <= 0x1p126f;
}

// q_i = clamp(rne(y_i / scale), -127, 127) for i < n; scale finite and > 0. kBounded: the caller
// knows |y_i| <= 127 * scale give or take f32 rounding (scale = max|y| / 127 in f32), so that a
// normal scale needs no clamp. Clamping before rounding is the same as after: the bounds are integers.
// Rounding adds 1.5 * 2^23, whose sum keeps the integer nearest t (ties to even) in its low mantissa
// bits for |t| < 2^22: the sum less that constant is the rounded value, and its bits less the
// constant's are the integer.
template <bool kBounded, class BeforeVector = NothingBeforeVector>
HWY_INLINE void Int8Values(const float* y, size_t n, float scale, int8_t* q, bool stream = false,
                           const BeforeVector& before_vector_arg = {}) {
  const BeforeVector before_vector = before_vector_arg;
  const DF d;
  const DI32 di;
  const DI8 d8;
  const VF divisor = hn::Set(d, scale), reciprocal = hn::Set(d, 1.0f / scale);
  const bool use_reciprocal = ReciprocalIsNormal(scale);
  const VF upper = hn::Set(d, float(quant::kInt8Max)), lower = hn::Set(d, -float(quant::kInt8Max));
  const VF round_constant = hn::Set(d, 0x1.8p23f);
  const auto round_constant_bits = hn::BitCast(di, round_constant);
  // Within 128, 4 * 2^-24 relative is below 2^-15: a product farther than 2^-13 from every k + 1/2
  // rounds as the quotient does. t - rne(t) is exact, and at most 1/2 in magnitude.
  const VF near_half = hn::Set(d, 0.5f - 0x1p-13f);
  ForEachVectorOf(n, [&](size_t i, size_t count) {
    before_vector(i, count);
    const VF v = LoadUpTo(d, y + i, count);
    VF rounded_plus;  // rne(y_i / scale) + 1.5 * 2^23
    bool divide = !use_reciprocal;
    if (HWY_LIKELY(use_reciprocal)) {
      VF t = hn::Mul(v, reciprocal);
      if (!kBounded) t = hn::Min(hn::Max(t, lower), upper);
      rounded_plus = hn::Add(t, round_constant);
      const VF fraction = hn::Abs(hn::Sub(t, hn::Sub(rounded_plus, round_constant)));
      divide = !hn::AllFalse(d, hn::Ge(fraction, near_half));
    }
    if (HWY_UNLIKELY(divide)) rounded_plus = hn::Add(hn::Min(hn::Max(hn::Div(v, divisor), lower), upper), round_constant);
    // Within [-127, 127]: the narrowing (which saturates) is exact.
    StoreBytes(d8, hn::DemoteTo(d8, hn::Sub(hn::BitCast(di, rounded_plus), round_constant_bits)), q, i, count, stream);
  });
}

// The E4M3 encodings of ratio's lanes, with sign_bits (0 or 0x80 per lane) as their sign bits:
// nearest even, magnitudes above 448 and infinities saturating to 448, NaN to S.1111.111. With near
// given, it is set where a value within 4 * 2^-24 relative of ratio could encode otherwise (see
// E4M3Values).
HWY_INLINE hn::Vec<DI32> E4M3Bits(DF d, VF ratio, hn::Vec<DU32> sign_bits, hn::Mask<DF>* near = nullptr) {
  const DU32 du;
  const DI32 di;
  const auto is_nan = hn::IsNaN(ratio);
  // NaN lanes compute on zero: their result is replaced at the end.
  const VF magnitude = hn::IfThenZeroElse(is_nan, hn::Min(hn::Abs(ratio), hn::Set(d, quant::kE4M3Max)));
  // Normal (2^-6 <= magnitude <= 448): rebias the exponent from 127 to 7 and round the 20 mantissa bits
  // E4M3 lacks to nearest even; a carry out of the mantissa moves into the exponent, as it should.
  const auto bits = hn::BitCast(du, magnitude);
  const auto rebiased = hn::Sub(bits, hn::Set(du, 120u << 23));  // wraps below 2^-6: not selected
  const auto lowest_kept = hn::And(hn::ShiftRight<20>(rebiased), hn::Set(du, 1u));
  const auto normal = hn::ShiftRight<20>(hn::Add(rebiased, hn::Add(hn::Set(du, 0x7FFFFu), lowest_kept)));
  // Subnormal (steps of 2^-9): adding 2^14, where f32's unit is 2^-9, rounds the magnitude to a step,
  // nearest even, and leaves the count of steps in the sum's low bits. 8 steps is the smallest normal,
  // whose encoding is 8.
  const VF two_to_14 = hn::Set(d, 0x1p14f);
  const VF steps_plus = hn::Add(magnitude, two_to_14);
  const auto subnormal = hn::Sub(hn::BitCast(du, steps_plus), hn::BitCast(du, two_to_14));
  const auto is_subnormal = hn::Lt(magnitude, hn::Set(d, quant::kE4M3MinNormal));
  auto code = hn::IfThenElse(hn::RebindMask(du, is_subnormal), subnormal, normal);
  code = hn::IfThenElse(hn::RebindMask(du, is_nan), hn::Set(du, uint32_t{quant::kE4M3NaNBits}), code);
  if (near != nullptr) {
    // 4 * 2^-24 relative is 4 units in the last place of the magnitude's binade: normal values round
    // away the 20 low mantissa bits, whose midpoint is 0x80000, so within 16 units of it is near (across
    // a power of two there is no midpoint to cross). A subnormal one is near where it is within 2^-20 of
    // half a step from the step it rounds to (the distance is below 2^-28; both differences are exact).
    const auto low_bits = hn::And(bits, hn::Set(du, 0xFFFFFu));
    // |low_bits - 0x80000| <= 16, unsigned: below the range the difference wraps to a large value
    const auto normal_near = hn::Lt(hn::Sub(low_bits, hn::Set(du, 0x80000u - 16u)), hn::Set(du, 33u));
    const VF from_step = hn::Abs(hn::Sub(magnitude, hn::Sub(steps_plus, two_to_14)));
    const auto subnormal_near = hn::Ge(from_step, hn::Set(d, 0x1p-10f - 0x1p-20f));
    *near = hn::Or(hn::And(is_subnormal, subnormal_near), hn::AndNot(is_subnormal, hn::RebindMask(d, normal_near)));
  }
  return hn::BitCast(di, hn::Or(code, sign_bits));
}

// q_i = encode(y_i / scale) for i < n, any scale; the sign bit is sign(y_i) XOR sign(scale), the
// quotient's sign where it is not NaN, and for NaN quotients a sign that does not depend on the CPU.
// The product y * (1 / scale) encodes as the quotient except near a midpoint (see E4M3Bits), beyond
// 448 both saturate, and it is NaN exactly where the quotient is (y NaN: 1 / scale is finite).
template <class BeforeVector = NothingBeforeVector>
HWY_INLINE void E4M3Values(const float* y, size_t n, float scale, uint8_t* q, bool stream = false,
                           const BeforeVector& before_vector_arg = {}) {
  const BeforeVector before_vector = before_vector_arg;
  const DF d;
  const DU32 du;
  const DU8 d8;
  const VF divisor = hn::Set(d, scale), reciprocal = hn::Set(d, 1.0f / scale);
  const bool use_reciprocal = ReciprocalIsNormal(scale);
  const auto divisor_bits = hn::BitCast(du, divisor);
  ForEachVectorOf(n, [&](size_t i, size_t count) {
    before_vector(i, count);
    const VF v = LoadUpTo(d, y + i, count);
    const auto sign_bits =
        hn::And(hn::ShiftRight<24>(hn::Xor(hn::BitCast(du, v), divisor_bits)), hn::Set(du, uint32_t{quant::kE4M3SignBit}));
    hn::Vec<DI32> codes;
    bool divide = !use_reciprocal;
    if (HWY_LIKELY(use_reciprocal)) {
      hn::Mask<DF> near;
      codes = E4M3Bits(d, hn::Mul(v, reciprocal), sign_bits, &near);
      divide = !hn::AllFalse(d, near);
    }
    if (HWY_UNLIKELY(divide)) codes = E4M3Bits(d, hn::Div(v, divisor), sign_bits);
    // The int32 lanes are encodings, within [0, 255]: the narrowing is exact.
    StoreBytes(d8, hn::DemoteTo(d8, codes), q, i, count, stream);
  });
}

}  // namespace quantize_detail

// y: (n) f32 -> q: (n) int8, *scale: f32, with y ~ q * scale. Symmetric, one scale for the row:
//   scale = max|y| / 127 (f32 division), q = clamp(rne(y / scale), -127, 127) (f32 division).
// scale 0 (an all-zero row, or max|y| < 127 * 2^-150 so that the division underflows) gives q = 0.
// A row with a NaN gets scale NaN and one with an infinity (and no NaN) scale +inf, both with q = 0:
// such a row has no int8 form, and dequantizing it gives NaN throughout, as the norm's own output
// does for a row with a NaN. n = 0 writes scale 0 and nothing else.
// max_bits: MaxMagnitudeBits over the row, taken where y was made.
// stream: see StoreBytes. before_vector: see NothingBeforeVector; a row that needs no quotients (scale
// 0, infinite or NaN) does not call it.
template <class BeforeVector = quantize_detail::NothingBeforeVector>
inline void QuantizeInt8Row(const float* y, int64_t n, uint32_t max_bits, int8_t* q, float* scale,
                            bool stream = false, const BeforeVector& before_vector = {}) {
  using namespace quantize_detail;
  const size_t count = static_cast<size_t>(n);
  if (max_bits >= kInfinityBits) {
    *scale = max_bits == kInfinityBits ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    std::fill_n(q, count, int8_t{0});
    return;
  }
  const float row_scale = FloatFromBits(max_bits) / float(quant::kInt8Max);
  *scale = row_scale;
  if (row_scale == 0.0f) {
    std::fill_n(q, count, int8_t{0});
    return;
  }
  Int8Values<true>(y, count, row_scale, q, stream, before_vector);
}
inline void QuantizeInt8Row(const float* y, int64_t n, int8_t* q, float* scale) {
  QuantizeInt8Row(y, n, MaxMagnitudeBits(y, static_cast<size_t>(n)), q, scale);
}

// y: (n) f32 -> q: (n) OCP E4M3FN bytes, with y ~ decode(q) * scale; *scale_inout: f32.
// dynamic: scale = max|y| / 448 (f32 division), written to *scale_inout. scale 0 (an all-zero row, or
//   underflow) gives q = 0x00. A row with a NaN gets scale NaN, one with an infinity scale +inf, both
//   with every q = NaN (0x7F): the row has no fp8 form.
// static: *scale_inout is read and left alone. It should be finite and > 0 (the C ABI refuses others);
//   any other scale gives what the formula below gives, the same on every target.
// q = encode(y / scale) (f32 division): to nearest even, finite magnitudes beyond 448 and infinities
// saturating to +-448 (0x7E / 0xFE), NaN -> 0x7F / 0xFF; the sign bit is sign(y) XOR sign(scale).
// This form is the dynamic one with max_bits known (MaxMagnitudeBits over the row, taken where y
// was made); the one after it takes either. stream and before_vector: as for QuantizeInt8Row.
template <class BeforeVector = quantize_detail::NothingBeforeVector>
inline void QuantizeFp8E4M3Row(const float* y, int64_t n, uint32_t max_bits, uint8_t* q, float* scale,
                               bool stream = false, const BeforeVector& before_vector = {}) {
  using namespace quantize_detail;
  const size_t count = static_cast<size_t>(n);
  if (max_bits >= kInfinityBits) {
    *scale = max_bits == kInfinityBits ? std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    std::fill_n(q, count, quant::kE4M3NaNBits);
    return;
  }
  const float row_scale = FloatFromBits(max_bits) / quant::kE4M3Max;
  *scale = row_scale;
  if (row_scale == 0.0f) {
    std::fill_n(q, count, uint8_t{0});
    return;
  }
  E4M3Values(y, count, row_scale, q, stream, before_vector);
}
template <class BeforeVector = quantize_detail::NothingBeforeVector>
inline void QuantizeFp8E4M3Row(const float* y, int64_t n, uint8_t* q, float* scale_inout, bool dynamic,
                               bool stream = false, const BeforeVector& before_vector = {}) {
  using namespace quantize_detail;
  const size_t count = static_cast<size_t>(n);
  if (dynamic) return QuantizeFp8E4M3Row(y, n, MaxMagnitudeBits(y, count), q, scale_inout, stream, before_vector);
  E4M3Values(y, count, *scale_inout, q, stream, before_vector);
}

// y: (n) f32, n a multiple of 32 (the caller checks: the C ABI refuses other lengths; a remainder
// would be left unwritten) -> blocks: (n / 32) quant::BlockQ8_0, ggml's q8_0 layout, d in the
// machine's byte order as ggml stores it.
// Per block: d = f16(max|y| / 127), the f32 quotient rounded to nearest even, saturating at 65504
// (the largest finite f16) rather than overflowing; q = clamp(rne(y / d), -127, 127), dividing in f32
// by the stored f16 value; d = 0 (a zero block, or max|y| below about 3.8e-6, whose d rounds to 0)
// gives q = 0. A block with a NaN gets d = NaN (0x7E00), one with an infinity d = +inf (0x7C00), both
// with q = 0.
// ggml's quantize_row_q8_0_ref stores the same d (but where ours saturates, ggml's overflows to inf)
// and computes q otherwise: y times 1 / d of the unrounded f32 d, rounded half away from zero (roundf).
// Its q is one step from ours where the two quotients round differently: at ties, and mostly where the
// f16 rounding of d (up to 2^-11 relative, 0.06 at q = 127) moves y / d across a midpoint, about one
// value in 130 for Gaussian rows. Ours makes q * d the nearest such product to y for the d stored,
// which is the one a consumer multiplies by. Where d rounds to 0, ggml's q are not 0, but read as 0.
// before_vector: as for QuantizeInt8Row (a block whose d is 0 does not call it).
template <class BeforeVector = quantize_detail::NothingBeforeVector>
inline void QuantizeQ8_0Row(const float* y, int64_t n, void* blocks, const BeforeVector& before_vector = {}) {
  using namespace quantize_detail;
  constexpr size_t kBlock = quant::kQ8_0BlockSize;
  auto* out = static_cast<uint8_t*>(blocks);
  for (size_t b = 0; b < static_cast<size_t>(n) / kBlock; ++b) {
    const float* block_y = y + b * kBlock;
    uint8_t* block = out + b * sizeof(quant::BlockQ8_0);
    auto* qs = reinterpret_cast<int8_t*>(block + offsetof(quant::BlockQ8_0, qs));
    const uint32_t max_bits = MaxMagnitudeBits(block_y, kBlock);
    uint16_t d_bits;
    float d = 0.0f;
    if (max_bits >= kInfinityBits) {
      d_bits = max_bits == kInfinityBits ? quant::kF16InfBits : quant::kF16NaNBits;
    } else {
      d_bits = rmsnorm::f16::from_float(FloatFromBits(max_bits) / float(quant::kInt8Max));
      if (d_bits == quant::kF16InfBits) d_bits = quant::kF16MaxFiniteBits;
      d = rmsnorm::f16::to_float(d_bits);
    }
    std::memcpy(block + offsetof(quant::BlockQ8_0, d), &d_bits, sizeof d_bits);
    if (d == 0.0f) {
      std::memset(qs, 0, kBlock);
    } else {
      const size_t first = b * kBlock;
      Int8Values<false>(block_y, kBlock, d, qs, false,
                        [=](size_t i, size_t count) RMSNORM_INLINE_LAMBDA { before_vector(first + i, count); });
    }
  }
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
