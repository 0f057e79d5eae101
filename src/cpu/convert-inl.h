// The f32 vectors every kernel computes in, and whole vectors of f32, bf16 and f16 storage moved to and
// from them, compiled once per Highway target. The rest of the kernel layer builds on these: the loops
// over a row (loops-inl.h), the canonical sums (sums-inl.h) and the norms' shared arithmetic
// (norm_math-inl.h). What a target has (F16C, masked moves, the bf16 zipped order) is decided here,
// once, so that every path agrees on it.
//
// Conversions round to nearest even, keep NaN a quiet NaN and overflow to infinity on every target.
// (Highway 1.0.3 truncates bf16 and, without F16C, mishandles f16 infinities and NaN, so the
// conversions are ours; the public rmsnorm::bf16 / rmsnorm::f16 define the same rounding.)

// Per-target include guard, the Highway way.
#if defined(RMSNORM_SRC_CPU_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RMSNORM_SRC_CPU_CONVERT_INL_H_
#undef RMSNORM_SRC_CPU_CONVERT_INL_H_
#else
#define RMSNORM_SRC_CPU_CONVERT_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "cpu/native_bf16.h"
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
HWY_INLINE hn::Vec<DU16> Bf16BitsSoftware(VF v) {
  return hn::BitCast(DU16(), hn::DemoteTo(hn::Rebind<int16_t, DF>(), Bf16BitsWide(v)));
}

#undef RMSNORM_HAVE_NATIVE_BF16
#if HWY_TARGET == HWY_AVX3
#define RMSNORM_HAVE_NATIVE_BF16 1
// VCVTNEPS2BF16 (AVX512_BF16, see native_bf16.h) where the CPU has it: the software rounding's bits
// (nearest even, overflow to infinity, a NaN's sign and upper payload made quiet) in one instruction
// instead of eight. It flushes subnormal inputs to a signed zero, where ours rounds them, so a vector
// holding one (rare: |x| < 2^-126) takes the software rounding. Inline assembly: GCC declines to
// inline an intrinsic for an extension the caller's target attribute lacks, and Highway's AVX3 lacks it.
// The lanes the instruction would flush: subnormal ones (VFPCLASSPS class 0x20), as a mask.
HWY_INLINE __mmask16 SubnormalLanes(VF v) { return _mm512_fpclass_ps_mask(v.raw, 0x20); }

HWY_INLINE hn::Vec<DU16> Bf16BitsNative(VF v) {
  if (HWY_UNLIKELY(SubnormalLanes(v) != 0)) return Bf16BitsSoftware(v);
  __m256i bits;
  asm("vcvtneps2bf16 %1, %0" : "=v"(bits) : "v"(v.raw));
  return hn::Vec<DU16>{bits};
}
#else
#define RMSNORM_HAVE_NATIVE_BF16 0
#endif

HWY_INLINE hn::Vec<DU16> Bf16Bits(DF /* d */, VF v) {
#if RMSNORM_HAVE_NATIVE_BF16
  if (NativeBf16Rounding()) return Bf16BitsNative(v);
#endif
  return Bf16BitsSoftware(v);
}

using DU16Full = hn::Repartition<uint16_t, DF>;  // 2N lanes: one full vector of bf16

#if RMSNORM_HAVE_NATIVE_BF16
// VCVTNE2PS2BF16 (see Bf16BitsNative): low's encodings in the lower half, high's in the upper. Whether
// the instruction may round the two: neither holds a subnormal lane, which it would flush.
HWY_INLINE bool NativeRoundsBoth(VF low, VF high) { return (SubnormalLanes(low) | SubnormalLanes(high)) == 0; }
HWY_INLINE hn::Vec<DU16Full> Bf16HalvesNative(VF low, VF high) {
  __m512i halves;
  asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(halves) : "v"(high.raw), "v"(low.raw));
  return hn::Vec<DU16Full>{halves};
}

// Two f32 vectors holding 2N consecutive columns, rounded as Bf16BitsNative: Bf16HalvesNative's order
// is column order, so one instruction and one 64-byte store serve the two, which made the backwards'
// dx faster in cache and from memory (the commit says by how much). Only where NativeBf16Rounding();
// two vectors holding a subnormal lane take the software rounding.
HWY_INLINE hn::Vec<DU16Full> Bf16BitsTwoNative(VF first, VF second) {
  if (HWY_UNLIKELY(!NativeRoundsBoth(first, second))) {
    return hn::Combine(DU16Full(), Bf16BitsSoftware(second), Bf16BitsSoftware(first));
  }
  return Bf16HalvesNative(first, second);
}
#endif

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

// Two f32 vectors rounded to bf16 as Bf16Bits and narrowed by one signed pack, in the pack's order: per
// 128-bit block, a's lanes of that block, then b's. One NaN test for the two (opposite infinities also
// take the NaN-aware rounding, which is right for any lane).
HWY_INLINE hn::Vec<hn::Repartition<int16_t, DF>> Bf16BitsPacked(DF d, VF a, VF b) {
  const hn::Repartition<int16_t, DF> di16;
  if (HWY_UNLIKELY(!hn::AllFalse(d, hn::IsNaN(hn::Add(a, b))))) {
    return hn::ReorderDemote2To(di16, Bf16BitsWide(a), Bf16BitsWide(b));
  }
  return hn::ReorderDemote2To(di16, Bf16BitsWideNotNaN(a), Bf16BitsWideNotNaN(b));
}

// Two f32 vectors holding 2N consecutive columns, rounded to bf16 as Bf16Bits: one pack for both (and
// on AVX2 one permute of its 64-bit blocks back into column order) instead of a pack and a permute
// each. The same bits as Bf16Bits of each.
HWY_INLINE hn::Vec<DU16Full> Bf16BitsTwo(DF d, VF first, VF second) {
  auto packed = Bf16BitsPacked(d, first, second);
#if HWY_TARGET == HWY_AVX2
  packed.raw = _mm256_permute4x64_epi64(packed.raw, 0xD8);  // the pack interleaves the 128-bit blocks
#endif
  return hn::BitCast(DU16Full(), packed);
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

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
