// The storage conversions, on every SIMD target: the kernels' vector code against the scalar
// rmsnorm::bf16 / rmsnorm::f16, and those against an independent oracle that picks the nearest
// representable value by comparing distances (ties to even, overflow to infinity).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "conversion_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include "hwy/highway.h"
#include "cpu/convert-inl.h"
#include "cpu/loops-inl.h"
#include "cpu/bf16_pairs-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

template <class T>
void StoreAs(const float* in, uint16_t* out, size_t n) {
  const DF d;
  ForEachVector(d, n, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA {
    Store(d, Load(d, in + i, count), reinterpret_cast<T*>(out) + i, count);
  });
}

template <class T>
void LoadFrom(const uint16_t* in, float* out, size_t n) {
  const DF d;
  ForEachVector(d, n, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA {
    Store(d, Load(d, reinterpret_cast<const T*>(in) + i, count), out + i, count);
  });
}

// fn(b, N) for the first column b of every whole 2N-block of n columns, N = Lanes(DF()): the two-vector
// bf16 paths below work on such blocks only.
template <class Fn>
void ForEachWholeBlock(size_t n, const Fn& fn) {
  const size_t N = hn::Lanes(DF());
  for (size_t b = 0; b + 2 * N <= n; b += 2 * N) fn(b, N);
}

// The paired bf16 path (bf16_pairs-inl.h) over whole 2N-blocks of n: in[b + l] goes to out[b + 2l] and
// in[b + N + l] to out[b + 2l + 1] when storing, and back when loading. False on targets without it.
bool StoreBf16Pairs(const float* in, uint16_t* out, size_t n) {
#if HWY_TARGET == HWY_SCALAR
  (void)in, (void)out, (void)n;
  return false;
#else
  const DF d;
  const bool native = NativeBf16Rounding();
  ForEachWholeBlock(n, [&](size_t b, size_t N) {
    StoreBf16Pair(hn::LoadU(d, in + b), hn::LoadU(d, in + b + N), reinterpret_cast<hwy::bfloat16_t*>(out) + b, false,
                  native);
  });
  return true;
#endif
}

bool LoadBf16Pairs(const uint16_t* in, float* out, size_t n) {
#if HWY_TARGET == HWY_SCALAR
  (void)in, (void)out, (void)n;
  return false;
#else
  const DF d;
  ForEachWholeBlock(n, [&](size_t b, size_t N) {
    VF even, odd;
    LoadBf16Pair(d, reinterpret_cast<const hwy::bfloat16_t*>(in) + b, &even, &odd);
    hn::StoreU(even, d, out + b);
    hn::StoreU(odd, d, out + b + N);
  });
  return true;
#endif
}

// The zipped bf16 path (bf16_pairs-inl.h) over whole 2N-blocks of n: f32 values read in zipped order
// (as the gain is), rounded and stored, which puts each back in its own place. False on targets
// without the path.
bool StoreZippedBf16(const float* in, uint16_t* out, size_t n) {
#if RMSNORM_HAVE_BF16_ZIP
  const DF d;
  ForEachWholeBlock(n, [&](size_t b, size_t) {
    VF low, high;
    LoadZipped(d, in + b, &low, &high);
    StoreBf16Zipped(d, low, high, reinterpret_cast<hwy::bfloat16_t*>(out) + b);
  });
  return true;
#else
  (void)in, (void)out, (void)n;
  return false;
#endif
}

// bf16 encodings widened in zipped order and stored back.
bool RoundTripZippedBf16(const uint16_t* in, uint16_t* out, size_t n) {
#if RMSNORM_HAVE_BF16_ZIP
  const DF d;
  ForEachWholeBlock(n, [&](size_t b, size_t) {
    VF low, high;
    LoadBf16Zipped(d, reinterpret_cast<const hwy::bfloat16_t*>(in) + b, &low, &high);
    StoreBf16Zipped(d, low, high, reinterpret_cast<hwy::bfloat16_t*>(out) + b);
  });
  return true;
#else
  (void)in, (void)out, (void)n;
  return false;
#endif
}

// f32 values rounded to bf16 by the kernels' output loop (ForEachOutput), written in the order and
// the way the hints say: where it has one (SSE4 and AVX2, and AVX3 where the CPU rounds), the path
// that rounds two vectors together.
void StoreBf16Output(const float* in, uint16_t* out, size_t n, bool stream, bool reversed) {
  const DF d;
  OutputHints<hwy::bfloat16_t> hints;
  hints.stream = stream;
  hints.reversed = reversed;
  ForEachOutput(d, reinterpret_cast<hwy::bfloat16_t*>(out), n, hints,
                [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA { return Load(d, in + i, count); });
}

size_t F32Lanes() { return hn::Lanes(DF()); }

void StoreBf16(const float* in, uint16_t* out, size_t n) { StoreAs<hwy::bfloat16_t>(in, out, n); }
void StoreF16(const float* in, uint16_t* out, size_t n) { StoreAs<hwy::float16_t>(in, out, n); }
void LoadBf16(const uint16_t* in, float* out, size_t n) { LoadFrom<hwy::bfloat16_t>(in, out, n); }
void LoadF16(const uint16_t* in, float* out, size_t n) { LoadFrom<hwy::float16_t>(in, out, n); }

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "rmsnorm/rmsnorm.hpp"
#include "test_util.h"

namespace rmsnorm::cpu {
HWY_EXPORT(StoreBf16);
HWY_EXPORT(StoreF16);
HWY_EXPORT(LoadBf16);
HWY_EXPORT(LoadF16);
HWY_EXPORT(StoreBf16Pairs);
HWY_EXPORT(LoadBf16Pairs);
HWY_EXPORT(StoreZippedBf16);
HWY_EXPORT(RoundTripZippedBf16);
HWY_EXPORT(StoreBf16Output);
HWY_EXPORT(F32Lanes);
}  // namespace rmsnorm::cpu

namespace rmsnorm::test {
namespace {

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Decodes a 16-bit pattern from its definition.
double DecodeF16(uint16_t h) {
  const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// Nearest of a sorted table of non-negative representable values; ties to the even encoding; at or
// beyond the midpoint to the next power of two above the largest finite value, infinity.
uint16_t Nearest(double magnitude, const std::vector<double>& values, double overflow_at, uint16_t inf_bits) {
  if (magnitude >= overflow_at) return inf_bits;
  const size_t hi = size_t(std::lower_bound(values.begin(), values.end(), magnitude) - values.begin());
  if (hi == values.size()) return uint16_t(hi - 1);  // above the largest finite, below the overflow point
  if (values[hi] == magnitude) return uint16_t(hi);
  const size_t lo = hi - 1;
  const double below = magnitude - values[lo], above = values[hi] - magnitude;
  if (below < above) return uint16_t(lo);
  if (above < below) return uint16_t(hi);
  return uint16_t((lo & 1) ? hi : lo);
}

struct Oracle {
  std::vector<double> values;  // index = encoding of the non-negative finite values
  double overflow_at;
  uint16_t inf_bits;
  uint16_t Round(float f) const {
    const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    return uint16_t(sign | Nearest(std::fabs(double(f)), values, overflow_at, inf_bits));
  }
};

Oracle F16Oracle() {
  Oracle o;
  for (uint32_t h = 0; h < 0x7C00; ++h) o.values.push_back(DecodeF16(uint16_t(h)));
  o.overflow_at = (65504.0 + 65536.0) / 2;
  o.inf_bits = 0x7C00;
  return o;
}

Oracle Bf16Oracle() {
  Oracle o;
  for (uint32_t h = 0; h < 0x7F80; ++h) o.values.push_back(double(FromBits(h << 16)));
  const double largest = o.values.back();
  o.overflow_at = (largest + std::ldexp(1.0, 128)) / 2;
  o.inf_bits = 0x7F80;
  return o;
}

// f32 inputs that stress rounding: every value of the 16-bit type, the midpoints between neighbours
// and one f32 ulp either side of them, specials, and random bit patterns.
std::vector<float> Samples(bool bf16) {
  std::vector<float> s;
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float v = bf16 ? FromBits(h << 16) : float(DecodeF16(uint16_t(h)));
    s.push_back(v);
    if (!std::isfinite(v)) continue;
    const uint32_t next_bits = bf16 ? ((h + 1) << 16) : 0;
    const float next = bf16 ? FromBits(next_bits) : float(DecodeF16(uint16_t(h + 1)));
    if (!std::isfinite(next) || (h & 0x7FFF) == 0x7FFF) continue;
    const float mid = float((double(v) + double(next)) / 2);  // exact: one more bit than the type
    s.push_back(mid);
    s.push_back(std::nextafter(mid, 0.0f));
    s.push_back(std::nextafter(mid, INFINITY));
    s.push_back(std::nextafter(mid, -INFINITY));
  }
  for (float v : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 3.4e38f, -3.4e38f, 1e-45f, 65519.99f, 65520.0f, 1e-8f})
    s.push_back(v);
  std::mt19937 rng(7);
  for (int i = 0; i < 300000; ++i) s.push_back(FromBits(rng()));
  return s;
}

bool IsNan16(uint16_t h, bool bf16) { return bf16 ? (h & 0x7FFF) > 0x7F80 : (h & 0x7FFF) > 0x7C00; }
uint16_t QuietBit(bool bf16) { return bf16 ? 0x0040 : 0x0200; }

void CheckStore(bool bf16) {
  const Oracle oracle = bf16 ? Bf16Oracle() : F16Oracle();
  const std::vector<float> in = Samples(bf16);
  for (size_t i = 0; i < in.size(); ++i) {
    if (std::isnan(in[i])) continue;
    const uint16_t scalar = bf16 ? bf16::from_float(in[i]) : f16::from_float(in[i]);
    ASSERT_EQ(oracle.Round(in[i]), scalar) << "scalar " << (bf16 ? "bf16" : "f16") << " of " << in[i];
  }
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    std::vector<uint16_t> simd(in.size());
    (bf16 ? HWY_DYNAMIC_DISPATCH(cpu::StoreBf16) : HWY_DYNAMIC_DISPATCH(cpu::StoreF16))(in.data(), simd.data(), in.size());
    for (size_t i = 0; i < in.size(); ++i) {
      const uint16_t scalar = bf16 ? bf16::from_float(in[i]) : f16::from_float(in[i]);
      if (std::isnan(in[i])) {
        ASSERT_TRUE(IsNan16(simd[i], bf16) && (simd[i] & QuietBit(bf16))) << TargetName(target) << " NaN " << Bits(in[i]);
        ASSERT_TRUE(IsNan16(scalar, bf16) && (scalar & QuietBit(bf16)));
        continue;
      }
      ASSERT_EQ(scalar, simd[i]) << TargetName(target) << " of " << in[i] << " (bits " << Bits(in[i]) << ")";
    }
  }
}

void CheckLoad(bool bf16) {
  std::vector<uint16_t> in(0x10000);
  for (uint32_t h = 0; h < 0x10000; ++h) in[h] = uint16_t(h);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float scalar = bf16 ? float(bf16::from_bits(uint16_t(h))) : f16::to_float(uint16_t(h));
    const double exact = bf16 ? double(FromBits(h << 16)) : DecodeF16(uint16_t(h));
    if (std::isnan(exact)) {
      ASSERT_TRUE(std::isnan(scalar));
    } else {
      ASSERT_EQ(exact, double(scalar)) << "scalar decode of " << h;
      ASSERT_EQ(std::signbit(exact), std::signbit(scalar));
    }
  }
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    std::vector<float> simd(in.size());
    (bf16 ? HWY_DYNAMIC_DISPATCH(cpu::LoadBf16) : HWY_DYNAMIC_DISPATCH(cpu::LoadF16))(in.data(), simd.data(), in.size());
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const float scalar = bf16 ? float(bf16::from_bits(uint16_t(h))) : f16::to_float(uint16_t(h));
      if (std::isnan(scalar)) {
        ASSERT_TRUE(std::isnan(simd[h])) << TargetName(target) << " " << h;
      } else {
        ASSERT_EQ(Bits(scalar), Bits(simd[h])) << TargetName(target) << " decode of " << h;
      }
    }
  }
}

TEST(Conversion, Bf16StoreRoundsToNearestEven) { CheckStore(true); }

// Where pair index j of a paired block lands: the first N inputs at even places, the next N at odd.
size_t PairPlace(size_t j, size_t lanes) {
  const size_t block = j / (2 * lanes) * 2 * lanes, in_block = j % (2 * lanes);
  return block + (in_block < lanes ? 2 * in_block : 2 * (in_block - lanes) + 1);
}

// The paired path rounds as the per-vector one does, for everything but signaling NaNs and NaNs with a
// nonzero low half, which it never meets (it rounds arithmetic results; see bf16_pairs-inl.h): those
// are left out here, everything else must match.
TEST(Conversion, Bf16PairsRoundAsTheVectorPath) {
  std::vector<float> in = Samples(true);
  for (uint32_t payload : {0x7FC00000u, 0xFFC00000u, 0x7FD50000u, 0xFFC10000u}) in.push_back(FromBits(payload));
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    const size_t lanes = HWY_DYNAMIC_DISPATCH(cpu::F32Lanes)();
    const size_t n = in.size() / (2 * lanes) * (2 * lanes);
    std::vector<uint16_t> paired(n);
    if (!HWY_DYNAMIC_DISPATCH(cpu::StoreBf16Pairs)(in.data(), paired.data(), n)) continue;
    std::vector<uint16_t> encodings(0x10000);
    for (uint32_t h = 0; h < 0x10000; ++h) encodings[h] = uint16_t(h);
    std::vector<float> loaded(0x10000);
    ASSERT_TRUE(HWY_DYNAMIC_DISPATCH(cpu::LoadBf16Pairs)(encodings.data(), loaded.data(), 0x10000));
    size_t checked_nans = 0;
    for (size_t j = 0; j < n; ++j) {
      const uint16_t got = paired[PairPlace(j, lanes)];
      if (std::isnan(in[j])) {
        if ((Bits(in[j]) & 0xFFFF) != 0 || (Bits(in[j]) & 0x00400000) == 0) continue;
        ASSERT_EQ(uint16_t((Bits(in[j]) >> 16) | QuietBit(true)), got) << TargetName(target) << " NaN " << Bits(in[j]);
        ++checked_nans;
        continue;
      }
      ASSERT_EQ(bf16::from_float(in[j]), got) << TargetName(target) << " of " << in[j] << " (bits " << Bits(in[j]) << ")";
    }
    EXPECT_GE(checked_nans, 4u);
    for (uint32_t h = 0; h < 0x10000; ++h) {
      // loaded[j] came from encoding PairPlace(j): the exact widening, NaNs included.
      const size_t j = h;
      ASSERT_EQ(uint32_t(PairPlace(j, lanes)) << 16, Bits(loaded[j])) << TargetName(target) << " load " << j;
    }
  }
}

// The zipped path writes exactly what the per-vector path writes, NaNs included, and in the right
// places: values read in the gain's order land in their own columns, and encodings widened in zipped
// order come back unchanged (NaNs made quiet).
TEST(Conversion, Bf16ZippedRoundsAsTheVectorPath) {
  const std::vector<float> in = Samples(true);
  int tested = 0;
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    const size_t lanes = HWY_DYNAMIC_DISPATCH(cpu::F32Lanes)();
    const size_t n = in.size() / (2 * lanes) * (2 * lanes);
    std::vector<uint16_t> zipped(n), per_vector(n);
    if (!HWY_DYNAMIC_DISPATCH(cpu::StoreZippedBf16)(in.data(), zipped.data(), n)) continue;
    HWY_DYNAMIC_DISPATCH(cpu::StoreBf16)(in.data(), per_vector.data(), n);
    for (size_t j = 0; j < n; ++j)
      ASSERT_EQ(per_vector[j], zipped[j]) << TargetName(target) << " of bits " << Bits(in[j]) << " at " << j;
    std::vector<uint16_t> encodings(0x10000), back(0x10000);
    for (uint32_t h = 0; h < 0x10000; ++h) encodings[h] = uint16_t(h);
    ASSERT_TRUE(HWY_DYNAMIC_DISPATCH(cpu::RoundTripZippedBf16)(encodings.data(), back.data(), 0x10000));
    for (uint32_t h = 0; h < 0x10000; ++h) {
      const uint16_t expected = IsNan16(uint16_t(h), true) ? uint16_t(h | QuietBit(true)) : uint16_t(h);
      ASSERT_EQ(expected, back[h]) << TargetName(target) << " encoding " << h;
    }
    ++tested;
  }
#if HWY_ARCH_X86
  EXPECT_GT(tested, 0) << "no target with the zipped path";
#endif
}

// The output loop writes exactly what the per-vector path writes, NaNs and subnormals included, on
// every target and whichever way the hints ask: streamed from a misaligned start (a head of per-vector
// stores), last block first, and with a partial last vector.
TEST(Conversion, Bf16OutputLoopRoundsAsTheVectorPath) {
  const std::vector<float> in = Samples(true);
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    std::vector<uint16_t> per_vector(in.size());
    HWY_DYNAMIC_DISPATCH(cpu::StoreBf16)(in.data(), per_vector.data(), in.size());
    for (const bool stream : {false, true}) {
      for (const bool reversed : {false, true}) {
        if (stream && reversed) continue;  // HintsFor never asks for both
        for (const size_t skip : {size_t{0}, size_t{3}}) {
          // 27 columns past the last whole 64: a partial last vector on every SIMD width.
          const size_t n = (in.size() - 64) / 64 * 64 + 27;
          std::vector<uint16_t> buffer(n + 64, 0xABCD);
          // An output 64-byte aligned, then moved by `skip` columns.
          const size_t first = (64 - reinterpret_cast<uintptr_t>(buffer.data()) % 64) % 64 / sizeof(uint16_t) + skip;
          uint16_t* out = buffer.data() + first;
          HWY_DYNAMIC_DISPATCH(cpu::StoreBf16Output)(in.data() + skip, out, n, stream, reversed);
          for (size_t j = 0; j < n; ++j)
            ASSERT_EQ(per_vector[skip + j], out[j]) << TargetName(target) << " stream " << stream << " reversed "
                                                    << reversed << " skip " << skip << " at " << j;
          for (size_t j = 0; j < buffer.size(); ++j) {
            if (j < first || j >= first + n) ASSERT_EQ(0xABCD, buffer[j]) << "written outside the output at " << j;
          }
        }
      }
    }
  }
}

TEST(Conversion, F16StoreRoundsToNearestEven) { CheckStore(false); }
TEST(Conversion, Bf16LoadIsExact) { CheckLoad(true); }
TEST(Conversion, F16LoadIsExact) { CheckLoad(false); }

// The partial-vector path: every count below the vector width, at every offset, reads and writes
// exactly count elements.
TEST(Conversion, PartialVectorsTouchOnlyTheirElements) {
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    for (size_t n = 0; n <= 40; ++n) {
      std::vector<float> in(n + 2, 1.5f);
      std::vector<uint16_t> out(n + 2, 0xABCD);
      HWY_DYNAMIC_DISPATCH(cpu::StoreBf16)(in.data() + 1, out.data() + 1, n);
      EXPECT_EQ(0xABCD, out[0]) << TargetName(target);
      EXPECT_EQ(0xABCD, out[n + 1]) << TargetName(target) << " n=" << n;
      for (size_t i = 1; i <= n; ++i) EXPECT_EQ(bf16::from_float(1.5f), out[i]);
    }
  }
}

}  // namespace
}  // namespace rmsnorm::test
#endif  // HWY_ONCE
