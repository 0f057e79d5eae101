// The row quantizers (src/cpu/quantize-inl.h) on every SIMD target, against the double-precision
// reference (src/ref/quantize.h) and against each other.
//
// What is asserted, for every target this machine runs:
// - every byte of every target's output equals the first target's, and so do the scales' bits;
// - the scales (int8, dynamic fp8) and q8_0's d have exactly the reference's bits;
// - a quantized value equals the reference's, or is one step from it where the kernels' f32 quotient
//   y / scale differs from the exact one and the rounding midpoint between the two values lies
//   between them (inclusive): the only place where rounding y / scale to f32 first may change the
//   result. Where the f32 quotient is exact (ties included) the value must be the reference's;
// - nothing is written past the output.
// The cases that decide a rounding (ties, 0.49999997, saturation, NaN, zero rows) also spell out the
// expected bytes, so that the reference is checked too.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "quantize_test.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include "hwy/highway.h"
#include "cpu/quantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

void Int8Row(const float* y, int64_t n, int8_t* q, float* scale) { QuantizeInt8Row(y, n, q, scale); }
void Fp8Row(const float* y, int64_t n, uint8_t* q, float* scale, bool dynamic) {
  QuantizeFp8E4M3Row(y, n, q, scale, dynamic);
}
void Q8_0Row(const float* y, int64_t n, void* blocks) { QuantizeQ8_0Row(y, n, blocks); }

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "ref/quant_formats.h"
#include "ref/quantize.h"
#include "test_util.h"

namespace rmsnorm::cpu {
HWY_EXPORT(Int8Row);
HWY_EXPORT(Fp8Row);
HWY_EXPORT(Q8_0Row);
}  // namespace rmsnorm::cpu

namespace rmsnorm::test {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

enum class Format { kInt8, kFp8Dynamic, kFp8Static, kQ8_0 };

const char* FormatName(Format format) {
  switch (format) {
    case Format::kInt8: return "int8";
    case Format::kFp8Dynamic: return "fp8 dynamic";
    case Format::kFp8Static: return "fp8 static";
    case Format::kQ8_0: return "q8_0";
  }
  return "?";
}

size_t OutputBytes(Format format, size_t n) {
  return format == Format::kQ8_0 ? n / quant::kQ8_0BlockSize * sizeof(quant::BlockQ8_0) : n;
}

// One row's output: the bytes written (q, or the q8_0 blocks) and the scale (int8 and fp8).
struct Quantized {
  std::vector<uint8_t> bytes;
  float scale = 0.0f;
  int8_t q(size_t i) const { return static_cast<int8_t>(bytes[i]); }
  quant::BlockQ8_0 Block(size_t b) const {
    quant::BlockQ8_0 block;
    std::memcpy(&block, &bytes[b * sizeof block], sizeof block);
    return block;
  }
};

constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xA5;

// Quantizes y with the reference or, for simd, with the target HWY_DYNAMIC_DISPATCH picks now. The
// output sits in a buffer with guard bytes after it, which must come back untouched.
Quantized Quantize(Format format, const std::vector<float>& y, float static_scale, bool simd) {
  const size_t bytes = OutputBytes(format, y.size());
  std::vector<uint8_t> buffer(bytes + kGuardBytes, kGuardByte);
  const auto n = static_cast<int64_t>(y.size());
  auto* q8 = reinterpret_cast<int8_t*>(buffer.data());
  Quantized out;
  out.scale = static_scale;
  switch (format) {
    case Format::kInt8:
      if (simd) HWY_DYNAMIC_DISPATCH(cpu::Int8Row)(y.data(), n, q8, &out.scale);
      else ref::QuantizeInt8Row(y.data(), n, q8, &out.scale);
      break;
    case Format::kFp8Dynamic:
    case Format::kFp8Static: {
      const bool dynamic = format == Format::kFp8Dynamic;
      if (simd) HWY_DYNAMIC_DISPATCH(cpu::Fp8Row)(y.data(), n, buffer.data(), &out.scale, dynamic);
      else ref::QuantizeFp8E4M3Row(y.data(), n, buffer.data(), &out.scale, dynamic);
      break;
    }
    case Format::kQ8_0:
      if (simd) HWY_DYNAMIC_DISPATCH(cpu::Q8_0Row)(y.data(), n, buffer.data());
      else ref::QuantizeQ8_0Row(y.data(), n, buffer.data());
      break;
  }
  for (size_t i = bytes; i < buffer.size(); ++i) {
    if (buffer[i] != kGuardByte) {
      ADD_FAILURE() << FormatName(format) << (simd ? "" : " reference") << " wrote byte " << i << " past its " << bytes;
      break;
    }
  }
  buffer.resize(bytes);
  out.bytes = std::move(buffer);
  return out;
}

// The test of one differing value: got is one step from want, the f32 quotient differs from the exact
// one, and the midpoint between got's and want's values lies between the two quotients.
bool ExplainedByF32Quotient(double midpoint, double exact, double f32_quotient) {
  return exact != f32_quotient && (midpoint - exact) * (midpoint - f32_quotient) <= 0.0;
}

// Empty if q (int8, or q8_0's values) agrees with the reference's as the top of the file says.
std::string Int8Disagreement(int8_t got, int8_t want, float y, float scale, size_t* explained) {
  if (got == want) return "";
  const double exact = double(y) / double(scale), f32_quotient = double(y / scale);
  if (std::abs(int(got) - int(want)) == 1 && ExplainedByF32Quotient((got + want) / 2.0, exact, f32_quotient)) {
    ++*explained;
    return "";
  }
  std::ostringstream s;
  s.precision(9);
  s << "q " << int(got) << ", reference " << int(want) << " for y " << y << " / scale " << scale << " = " << exact;
  return s.str();
}

std::string E4M3Disagreement(uint8_t got, uint8_t want, float y, float scale, size_t* explained) {
  if (got == want) return "";
  const uint8_t got_magnitude = got & 0x7F, want_magnitude = want & 0x7F;
  const double exact = std::fabs(double(y) / double(scale)), f32_quotient = std::fabs(double(y / scale));
  const bool adjacent = ((got ^ want) & quant::kE4M3SignBit) == 0 && got_magnitude != quant::kE4M3NaNBits &&
                        want_magnitude != quant::kE4M3NaNBits && std::abs(int(got_magnitude) - int(want_magnitude)) == 1;
  if (adjacent) {
    const double midpoint = (double(ref::DecodeE4M3(got_magnitude)) + double(ref::DecodeE4M3(want_magnitude))) / 2;
    if (ExplainedByF32Quotient(midpoint, exact, f32_quotient)) {
      ++*explained;
      return "";
    }
  }
  std::ostringstream s;
  s.precision(9);
  s << std::hex << "e4m3 0x" << int(got) << ", reference 0x" << int(want) << std::dec << " for y " << y << " / scale "
    << scale << " = " << exact;
  return s.str();
}

// Empty if got agrees with the reference's want; counts the differences explained by the f32 quotient.
std::string Disagreement(Format format, const std::vector<float>& y, const Quantized& got, const Quantized& want,
                         size_t* explained) {
  std::ostringstream s;
  if (format != Format::kQ8_0 && Bits(got.scale) != Bits(want.scale)) {
    s.precision(9);
    s << "scale " << got.scale << " (bits " << std::hex << Bits(got.scale) << "), reference " << want.scale
      << " (bits " << Bits(want.scale) << ")";
    return s.str();
  }
  for (size_t i = 0; i < got.bytes.size() && format != Format::kQ8_0; ++i) {
    const std::string d = format == Format::kInt8
                              ? Int8Disagreement(got.q(i), want.q(i), y[i], got.scale, explained)
                              : E4M3Disagreement(got.bytes[i], want.bytes[i], y[i], got.scale, explained);
    if (!d.empty()) return "element " + std::to_string(i) + ": " + d;
  }
  for (size_t b = 0; format == Format::kQ8_0 && b < got.bytes.size() / sizeof(quant::BlockQ8_0); ++b) {
    const quant::BlockQ8_0 g = got.Block(b), w = want.Block(b);
    if (g.d != w.d) return "block " + std::to_string(b) + ": d bits " + std::to_string(g.d) + ", reference " + std::to_string(w.d);
    for (size_t j = 0; j < size_t(quant::kQ8_0BlockSize); ++j) {
      const size_t i = b * quant::kQ8_0BlockSize + j;
      const std::string d = Int8Disagreement(g.qs[j], w.qs[j], y[i], ref::DecodeF16(g.d), explained);
      if (!d.empty()) return "block " + std::to_string(b) + " element " + std::to_string(j) + ": " + d;
    }
  }
  return "";
}

// Quantizes y on every target: each against the reference, and each byte for byte against the first.
// Returns the reference's output; *explained counts the values one step off (all targets together).
Quantized CheckEveryTarget(Format format, const std::vector<float>& y, float static_scale, const std::string& what,
                           size_t* explained = nullptr) {
  size_t unused = 0;
  if (explained == nullptr) explained = &unused;
  const Quantized want = Quantize(format, y, static_scale, false);
  const std::vector<int64_t> targets = AvailableTargets();
  EXPECT_FALSE(targets.empty());
  Quantized first;
  for (size_t t = 0; t < targets.size(); ++t) {
    ScopedTarget scoped(targets[t]);
    const Quantized got = Quantize(format, y, static_scale, true);
    const std::string disagreement = Disagreement(format, y, got, want, explained);
    EXPECT_TRUE(disagreement.empty()) << FormatName(format) << ", " << what << ", n " << y.size() << ", "
                                      << TargetName(targets[t]) << ": " << disagreement;
    if (t == 0) {
      first = got;
      continue;
    }
    EXPECT_TRUE(got.bytes == first.bytes && Bits(got.scale) == Bits(first.scale))
        << FormatName(format) << ", " << what << ", n " << y.size() << ": " << TargetName(targets[t])
        << " wrote other bytes than " << TargetName(targets[0]);
  }
  return want;
}

// A row of n values whose magnitude changes every `run` elements, over 2^-30 .. 2^30.
std::vector<float> RandomRow(uint64_t seed, size_t n, size_t run) {
  uint64_t state = seed;
  std::vector<float> y(n);
  double spread = 1.0;
  for (size_t i = 0; i < n; ++i) {
    if (i % run == 0) spread = std::ldexp(1.0, int(SplitMix(state) % 61) - 30);
    y[i] = static_cast<float>(Uniform(state, 0.0, spread));
  }
  return y;
}

// A row of n values uniform in [-spread, spread).
std::vector<float> UniformRow(uint64_t seed, size_t n, double spread) {
  uint64_t state = seed;
  std::vector<float> y(n);
  for (float& v : y) v = static_cast<float>(Uniform(state, 0.0, spread));
  return y;
}

float MaxMagnitude(const std::vector<float>& y) {
  float max_magnitude = 0.0f;
  for (float v : y) max_magnitude = std::fmax(max_magnitude, std::fabs(v));
  return max_magnitude;
}

TEST(Quantize, RandomRowsOfEveryLengthMatchTheReference) {
  size_t explained = 0, values = 0;
  for (size_t n = 1; n <= 300; ++n) {
    const std::vector<float> y = RandomRow(n, n, n);  // one magnitude per row
    CheckEveryTarget(Format::kInt8, y, 0.0f, "random", &explained);
    CheckEveryTarget(Format::kFp8Dynamic, y, 0.0f, "random", &explained);
    // Static scales from far too small (most values saturate) to large (most are subnormal or zero).
    const float fitting = MaxMagnitude(y) / quant::kE4M3Max;
    for (float factor : {0.01f, 0.3f, 1.0f, 3.7f, 1000.0f})
      CheckEveryTarget(Format::kFp8Static, y, fitting * factor, "random, static scale x" + std::to_string(factor), &explained);
    values += 7 * n;
  }
  for (size_t blocks = 1; blocks <= 12; ++blocks) {
    for (size_t run : {size_t{5}, size_t{32}, size_t{1000}}) {
      const std::vector<float> y = RandomRow(1000 + blocks, blocks * quant::kQ8_0BlockSize, run);
      CheckEveryTarget(Format::kQ8_0, y, 0.0f, "random, magnitude runs of " + std::to_string(run), &explained);
      values += y.size();
    }
  }
  // Near-midpoint quotients are rare: many more would mean the test's allowance hides a real error.
  EXPECT_LT(explained * 1000, values * AvailableTargets().size()) << explained << " values one step off";
  std::string targets;
  for (int64_t target : AvailableTargets()) targets += " " + TargetName(target);
  std::printf("[ info ] targets%s: %zu of %zu values one step from the reference (f32 quotient near a midpoint)\n",
              targets.c_str(), explained, values * AvailableTargets().size());
}

// The same bytes on every CPU, not only on every target of this one: the outputs of a fixed set of rows
// (inputs from integer arithmetic, the same everywhere) hash to kRecordedQuantizedHash on x86-64
// (AVX3, AVX2, SSE4, SCALAR) and on aarch64 under qemu (NEON; SVE and SVE2 at 128, 256 and 512 bits).
constexpr uint64_t kRecordedQuantizedHash = 0x9880c10b4af37c3b;

TEST(Quantize, RecordedHashOnEveryCpu) {
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
  const auto add = [&hash](const void* data, size_t bytes) {
    for (size_t i = 0; i < bytes; ++i) hash = (hash ^ static_cast<const uint8_t*>(data)[i]) * 0x100000001b3ull;
  };
  const auto add_output = [&](Format format, const std::vector<float>& y, float static_scale) {
    CheckEveryTarget(format, y, static_scale, "recorded");
    ScopedTarget scoped(AvailableTargets().front());
    const Quantized q = Quantize(format, y, static_scale, true);
    add(q.bytes.data(), q.bytes.size());
    add(&q.scale, sizeof q.scale);
  };
  for (size_t n : {1, 7, 33, 100, 255}) {
    const std::vector<float> y = RandomRow(50 + n, n, 16);
    add_output(Format::kInt8, y, 0.0f);
    add_output(Format::kFp8Dynamic, y, 0.0f);
    add_output(Format::kFp8Static, y, 0.01f);
  }
  for (size_t n : {32, 96, 320}) add_output(Format::kQ8_0, RandomRow(70 + n, n, 8), 0.0f);
  EXPECT_EQ(kRecordedQuantizedHash, hash) << std::hex << "hash 0x" << hash;
}

TEST(Quantize, ZeroRowsGetScaleZeroAndZeros) {
  for (size_t n : {1, 3, 16, 17, 64, 100}) {
    for (bool negative_zeros : {false, true}) {
      std::vector<float> y(n, 0.0f);
      for (size_t i = 0; negative_zeros && i < n; i += 2) y[i] = -0.0f;
      const Quantized int8 = CheckEveryTarget(Format::kInt8, y, 0.0f, "zero row");
      EXPECT_EQ(0u, Bits(int8.scale));
      EXPECT_EQ(std::vector<uint8_t>(n, 0), int8.bytes);
      const Quantized fp8 = CheckEveryTarget(Format::kFp8Dynamic, y, 0.0f, "zero row");
      EXPECT_EQ(0u, Bits(fp8.scale));
      EXPECT_EQ(std::vector<uint8_t>(n, 0), fp8.bytes);
    }
  }
  // A zero block among others: d = 0 and q = 0 there only.
  std::vector<float> y = UniformRow(7, 96, 3.0);
  for (size_t i = 32; i < 64; ++i) y[i] = (i % 3 == 0) ? -0.0f : 0.0f;
  const Quantized q8_0 = CheckEveryTarget(Format::kQ8_0, y, 0.0f, "zero middle block");
  EXPECT_EQ(0, q8_0.Block(1).d);
  for (int8_t q : q8_0.Block(1).qs) EXPECT_EQ(0, q);
  EXPECT_NE(0, q8_0.Block(0).d);
}

TEST(Quantize, ScalesTooSmallToRepresentGiveZeros) {
  // max|y| / 127 underflows to 0 in f32: scale 0 and q = 0.
  const std::vector<float> smallest = {0x1p-149f, -0x1p-149f, 0.0f};
  const Quantized int8 = CheckEveryTarget(Format::kInt8, smallest, 0.0f, "underflowing scale");
  EXPECT_EQ(0u, Bits(int8.scale));
  EXPECT_EQ(std::vector<uint8_t>(3, 0), int8.bytes);
  const Quantized fp8 = CheckEveryTarget(Format::kFp8Dynamic, {0x1p-142f, -0x1p-145f}, 0.0f, "underflowing scale");
  EXPECT_EQ(0u, Bits(fp8.scale));
  // A subnormal f32 scale still quantizes.
  CheckEveryTarget(Format::kInt8, {1e-40f, -3e-41f, 7e-42f}, 0.0f, "subnormal scale");
  CheckEveryTarget(Format::kFp8Dynamic, {1e-40f, -3e-41f, 7e-42f}, 0.0f, "subnormal scale");
  // q8_0: d below f16's smallest subnormal rounds to 0, giving q = 0; a subnormal d still quantizes.
  std::vector<float> y(64);
  for (size_t i = 0; i < 32; ++i) y[i] = 1e-7f * float(int(i) - 16);
  for (size_t i = 32; i < 64; ++i) y[i] = 1e-5f * float(int(i) - 48);
  const Quantized q8_0 = CheckEveryTarget(Format::kQ8_0, y, 0.0f, "tiny d");
  EXPECT_EQ(0, q8_0.Block(0).d);
  for (int8_t q : q8_0.Block(0).qs) EXPECT_EQ(0, q);
  EXPECT_GT(q8_0.Block(1).d, 0);
  EXPECT_LT(q8_0.Block(1).d, 0x0400);  // subnormal f16
}

TEST(Quantize, OneHugeElementSetsTheScale) {
  for (size_t n : {1, 5, 40, 129}) {
    for (size_t at : {size_t{0}, n / 2, n - 1}) {
      std::vector<float> y = RandomRow(n + at, n, n);
      y[at] = (at % 2 ? -3e38f : 3e38f);
      const Quantized int8 = CheckEveryTarget(Format::kInt8, y, 0.0f, "one huge element");
      EXPECT_EQ(Bits(3e38f / 127.0f), Bits(int8.scale));
      EXPECT_EQ(at % 2 ? -127 : 127, int8.q(at));
      const Quantized fp8 = CheckEveryTarget(Format::kFp8Dynamic, y, 0.0f, "one huge element");
      EXPECT_EQ(at % 2 ? 0xFE : 0x7E, fp8.bytes[at]);
    }
  }
  // q8_0: max|y| / 127 beyond f16's range saturates d to 65504, and the values to +-127.
  std::vector<float> y = UniformRow(3, 64, 100.0);
  y[40] = -1e7f;
  const Quantized q8_0 = CheckEveryTarget(Format::kQ8_0, y, 0.0f, "d beyond f16");
  EXPECT_EQ(quant::kF16MaxFiniteBits, q8_0.Block(1).d);
  EXPECT_EQ(-127, q8_0.Block(1).qs[8]);
  y[40] = 3e38f;
  EXPECT_EQ(quant::kF16MaxFiniteBits, CheckEveryTarget(Format::kQ8_0, y, 0.0f, "d far beyond f16").Block(1).d);
}

// y / scale exactly k + 1/2 goes to the even neighbour; 0.49999997 (the float below 1/2) goes to 0.
TEST(Quantize, Int8TiesGoToEven) {
  for (float scale : {1.0f, 2.0f, 0.25f}) {
    std::vector<float> y = {127.0f * scale};  // sets the scale
    std::vector<int> want = {127};
    for (int k = -127; k <= 126; ++k) {
      y.push_back((float(k) + 0.5f) * scale);
      want.push_back(k % 2 == 0 ? k : k + 1);
    }
    for (float ratio : {0.49999997f, -0.49999997f, 1.4999999f, 2.5000002f, 126.49999f}) {
      y.push_back(ratio * scale);
      want.push_back(int(std::nearbyint(ratio)));
    }
    const Quantized int8 = CheckEveryTarget(Format::kInt8, y, 0.0f, "ties, scale " + std::to_string(scale));
    ASSERT_EQ(Bits(scale), Bits(int8.scale));
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(want[i], int8.q(i)) << "y / scale = " << y[i] / scale;
    // q8_0, block by block: d = 1 (127 / 127) is exact in f16.
    if (scale != 1.0f) continue;
    std::vector<float> blocks;
    std::vector<int> block_want;
    for (size_t i = 1; i < y.size(); ++i) {
      if (blocks.size() % 32 == 0) blocks.push_back(127.0f), block_want.push_back(127);
      blocks.push_back(y[i]);
      block_want.push_back(want[i]);
    }
    while (blocks.size() % 32 != 0) blocks.push_back(0.0f), block_want.push_back(0);
    const Quantized q8_0 = CheckEveryTarget(Format::kQ8_0, blocks, 0.0f, "ties");
    for (size_t i = 0; i < blocks.size(); ++i) {
      ASSERT_EQ(0x3C00, q8_0.Block(i / 32).d);
      EXPECT_EQ(block_want[i], q8_0.Block(i / 32).qs[i % 32]) << "y / d = " << blocks[i];
    }
  }
}

// The one allowed difference, made to happen: y whose exact quotient by scale = f32(1 / 127) lies just
// off k + 1/2 while the f32 quotient lands on or across it. Every target must round the f32 quotient
// (one step from the reference, the same bytes everywhere), and the check must accept exactly these.
TEST(Quantize, Int8F32QuotientAcrossAMidpointIsOneStepOff) {
  const float scale = 1.0f / 127.0f;
  std::vector<float> y = {1.0f};  // sets the scale
  for (int k = -127; k <= 126; ++k) {
    const float near = static_cast<float>((k + 0.5) * double(scale));
    for (int ulps = -6; ulps <= 6; ++ulps) {
      uint32_t bits = Bits(near) + uint32_t(near < 0 ? -ulps : ulps);
      float v;
      std::memcpy(&v, &bits, sizeof v);
      const int exact_rounded = int(std::nearbyint(double(v) / double(scale)));
      const int f32_rounded = int(std::nearbyint(v / scale));
      if (exact_rounded != f32_rounded && std::fabs(v) <= 1.0f) y.push_back(v);
    }
  }
  const size_t crossings = y.size() - 1;
  ASSERT_GT(crossings, 20u);
  size_t explained = 0;
  const Quantized int8 = CheckEveryTarget(Format::kInt8, y, 0.0f, "f32 quotient across a midpoint", &explained);
  ASSERT_EQ(Bits(scale), Bits(int8.scale));
  EXPECT_EQ(crossings * AvailableTargets().size(), explained);
  std::printf("[ info ] %zu values whose f32 quotient crosses a midpoint\n", crossings);
}

// The kernels take y / scale as y * (1 / scale) and divide only where that product is near a rounding
// midpoint. Here are y whose product and f32 quotient round apart (the inputs a reciprocal without that
// correction gets wrong), with scales whose reciprocal is inexact; every target must round the f32
// quotient, as the division would.
TEST(Quantize, ValuesAreTheF32QuotientsNotTheReciprocalProducts) {
  const auto f32_bits_step = [](float v, int ulps) {
    uint32_t bits = Bits(v) + uint32_t(ulps);
    float stepped;
    std::memcpy(&stepped, &bits, sizeof stepped);
    return stepped;
  };
  // Around every midpoint m of the format, y = m * scale give or take 40 ulps, kept where they differ.
  const auto apart = [&](const std::vector<double>& midpoints, float scale, auto round) {
    std::vector<float> y;
    const float reciprocal = 1.0f / scale;
    for (double m : midpoints) {
      const float center = static_cast<float>(m * double(scale));
      for (int ulps = -40; ulps <= 40; ++ulps) {
        const float v = f32_bits_step(center, ulps);
        if (round(v * reciprocal) != round(v / scale)) y.push_back(v);
      }
    }
    return y;
  };
  size_t int8_apart = 0, fp8_apart = 0;
  for (float scale : {1.0f / 127.0f, 0.3f, 1.7e-3f, 3.3e-30f, 2.9e25f, 0.77f}) {
    // int8, with one value max|y| so that the row's scale is max / 127 = scale's f32 quotient.
    const float max = 127.0f * scale;
    const float row_scale = max / 127.0f;
    std::vector<double> int8_midpoints;
    for (int k = -127; k <= 126; ++k) int8_midpoints.push_back(k + 0.5);
    const auto int8_round = [](float t) { return std::nearbyint(std::fmin(std::fmax(t, -127.0f), 127.0f)); };
    std::vector<float> y = apart(int8_midpoints, row_scale, int8_round);
    int8_apart += y.size();
    y.push_back(max);
    const std::string what = "reciprocal apart, scale " + std::to_string(scale);
    for (int64_t target : AvailableTargets()) {
      ScopedTarget scoped(target);
      const Quantized got = Quantize(Format::kInt8, y, 0.0f, true);
      ASSERT_EQ(Bits(row_scale), Bits(got.scale)) << what;
      for (size_t i = 0; i < y.size(); ++i)
        ASSERT_EQ(int(int8_round(y[i] / row_scale)), got.q(i)) << what << ", " << TargetName(target) << ", y " << y[i];
    }
    // fp8 with a static scale: the midpoints between neighbouring E4M3 magnitudes, both signs.
    std::vector<double> fp8_midpoints;
    for (int code = 0; code < quant::kE4M3MaxBits; ++code) {
      const double m = (ref::DecodeE4M3(uint8_t(code)) + ref::DecodeE4M3(uint8_t(code + 1))) / 2;
      fp8_midpoints.push_back(m);
      fp8_midpoints.push_back(-m);
    }
    const auto fp8_round = [](float t) { return ref::EncodeE4M3(double(t), std::signbit(t)); };
    const std::vector<float> y8 = apart(fp8_midpoints, scale, fp8_round);
    fp8_apart += y8.size();
    for (int64_t target : AvailableTargets()) {
      ScopedTarget scoped(target);
      const Quantized got = Quantize(Format::kFp8Static, y8, scale, true);
      for (size_t i = 0; i < y8.size(); ++i)
        ASSERT_EQ(fp8_round(y8[i] / scale), got.bytes[i]) << what << ", " << TargetName(target) << ", y " << y8[i];
    }
  }
  EXPECT_GT(int8_apart, 100u);
  EXPECT_GT(fp8_apart, 100u);
  std::printf("[ info ] %zu int8 and %zu fp8 values whose reciprocal product rounds apart\n", int8_apart, fp8_apart);
}

// With scale 1, y / scale is exact: every E4M3 value, every midpoint between neighbours and the f32
// values either side of it must give the reference's code, which the ties pick by even encoding.
TEST(Quantize, Fp8EveryValueAndMidpoint) {
  std::vector<float> y;
  for (int code = 0; code <= quant::kE4M3MaxBits; ++code) {
    const float value = ref::DecodeE4M3(uint8_t(code));
    y.push_back(value);
    y.push_back(-value);
    if (code == quant::kE4M3MaxBits) break;
    const float midpoint = (value + ref::DecodeE4M3(uint8_t(code + 1))) / 2;  // exact: one more bit
    for (float v : {midpoint, std::nextafter(midpoint, 0.0f), std::nextafter(midpoint, kInf)}) {
      y.push_back(v);
      y.push_back(-v);
    }
  }
  for (float scale : {1.0f, 0.5f, 64.0f}) {
    std::vector<float> scaled;
    for (float v : y) scaled.push_back(v * scale);
    const Quantized fp8 = CheckEveryTarget(Format::kFp8Static, scaled, scale, "every value and midpoint");
    for (size_t i = 0; i < y.size(); i += 8) {  // each code's own value encodes to the code
      EXPECT_EQ(uint8_t(i / 8), fp8.bytes[i]);
      EXPECT_EQ(uint8_t(0x80 | (i / 8)), fp8.bytes[i + 1]);
    }
  }
  // The subnormal range, 2^-9 .. 2^-6, spelled out: k + 1/2 steps of 2^-9 go to the even k.
  std::vector<float> subnormal;
  std::vector<uint8_t> want;
  for (int k = 0; k < 8; ++k) {
    subnormal.push_back((float(k) + 0.5f) * 0x1p-9f);
    want.push_back(uint8_t(k % 2 == 0 ? k : k + 1));  // 7.5 steps -> 8, the encoding of 2^-6
  }
  for (float v : {0x1p-11f, 0x1p-10f, std::nextafter(0x1p-10f, 1.0f), 0x1p-9f, 0x1.8p-7f, std::nextafter(0x1p-6f, 0.0f)}) {
    subnormal.push_back(v);
  }
  for (uint8_t code : {0x00, 0x00, 0x01, 0x01, 0x06, 0x08}) want.push_back(code);
  EXPECT_EQ(want, CheckEveryTarget(Format::kFp8Static, subnormal, 1.0f, "subnormals").bytes);
}

TEST(Quantize, Fp8SaturatesAt448) {
  const std::vector<float> y = {448.0f, 449.0f, 464.0f, 480.0f, 1e30f, kInf, -kInf, -500.0f, 432.0f, 431.0f, 3.4e38f};
  const std::vector<uint8_t> want = {0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0xFE, 0x7E, 0x7D, 0x7E};
  EXPECT_EQ(want, CheckEveryTarget(Format::kFp8Static, y, 1.0f, "beyond 448").bytes);
  // A static scale far too small for the row.
  const std::vector<uint8_t> saturated = {0x7E, 0xFE, 0x7E, 0xFE};
  EXPECT_EQ(saturated, CheckEveryTarget(Format::kFp8Static, {1.0f, -1.0f, 0.5f, -0.449f}, 1e-3f, "small static scale").bytes);
}

TEST(Quantize, NaNAndInfinity) {
  const std::vector<float> with_nan = {1.0f, -2.0f, kNaN, 0.5f, 3.0f};
  const std::vector<float> with_inf = {1.0f, -kInf, 0.25f, 2.0f, -1.0f};
  const std::vector<float> with_both = {kInf, kNaN, 1.0f, 2.0f, -1.0f};
  for (const auto& [y, scale] : {std::pair{with_nan, kNaN}, std::pair{with_inf, kInf}, std::pair{with_both, kNaN}}) {
    const Quantized int8 = CheckEveryTarget(Format::kInt8, y, 0.0f, "non-finite row");
    EXPECT_EQ(Bits(scale), Bits(int8.scale));
    EXPECT_EQ(std::vector<uint8_t>(y.size(), 0), int8.bytes);
    const Quantized fp8 = CheckEveryTarget(Format::kFp8Dynamic, y, 0.0f, "non-finite row");
    EXPECT_EQ(Bits(scale), Bits(fp8.scale));
    EXPECT_EQ(std::vector<uint8_t>(y.size(), quant::kE4M3NaNBits), fp8.bytes);
  }
  // Static fp8: each element on its own. 1.0 is 0x38 (exponent 7, mantissa 0).
  const std::vector<uint8_t> want = {0x7F, 0xFF, 0x7E, 0xFE, 0x38, 0xB8};
  EXPECT_EQ(want, CheckEveryTarget(Format::kFp8Static, {kNaN, -kNaN, kInf, -kInf, 1.0f, -1.0f}, 1.0f, "specials").bytes);
  EXPECT_EQ(std::vector<uint8_t>({0xFF, 0x7F, 0xB8}),
            CheckEveryTarget(Format::kFp8Static, {kNaN, -kNaN, 1.0f}, -1.0f, "negative static scale").bytes);
  // q8_0: only the blocks with a NaN or an infinity lose their values.
  std::vector<float> y = RandomRow(11, 128, 128);
  y[33] = kNaN;
  y[70] = -kInf;
  y[100] = kNaN;
  y[101] = kInf;
  const Quantized q8_0 = CheckEveryTarget(Format::kQ8_0, y, 0.0f, "non-finite blocks");
  const uint16_t want_d[] = {0, quant::kF16NaNBits, quant::kF16InfBits, quant::kF16NaNBits};
  for (size_t b = 1; b < 4; ++b) {
    EXPECT_EQ(want_d[b], q8_0.Block(b).d) << "block " << b;
    for (int8_t q : q8_0.Block(b).qs) EXPECT_EQ(0, q);
  }
  EXPECT_LT(q8_0.Block(0).d, quant::kF16InfBits);
}

TEST(Quantize, Q8_0IsGgmlsLayout) {
  EXPECT_EQ(34u, sizeof(quant::BlockQ8_0));
  EXPECT_EQ(2u, offsetof(quant::BlockQ8_0, qs));
  std::vector<float> y(64);
  for (size_t i = 0; i < 64; ++i) y[i] = float(int(i) - 32);
  y[63] = 127.0f * 0.5f;  // block 1: d = 0.5 (0x3800), so q = 2 y
  const Quantized q8_0 = CheckEveryTarget(Format::kQ8_0, y, 0.0f, "layout");
  ASSERT_EQ(68u, q8_0.bytes.size());
  uint16_t d1;
  std::memcpy(&d1, &q8_0.bytes[34], 2);
  EXPECT_EQ(0x3800, d1);
  for (size_t j = 0; j < 31; ++j) EXPECT_EQ(int8_t(2 * j), int8_t(q8_0.bytes[36 + j])) << j;
  EXPECT_EQ(127, int8_t(q8_0.bytes[67]));
  // A length that is not a multiple of 32 is the caller's to refuse: only whole blocks are written
  // (Quantize's guard bytes check that nothing follows them).
  y.resize(70, 1.0f);
  EXPECT_EQ(68u, CheckEveryTarget(Format::kQ8_0, y, 0.0f, "partial block").bytes.size());
}

// Inputs and outputs at any alignment give the aligned call's bytes (the kernels place rows anywhere).
TEST(Quantize, AnyAlignment) {
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    for (size_t n : {31, 64, 96, 203}) {
      const std::vector<float> y = UniformRow(n, n, 4.0);
      const Quantized int8 = Quantize(Format::kInt8, y, 0.0f, true);
      const Quantized fp8 = Quantize(Format::kFp8Dynamic, y, 0.0f, true);
      const Quantized q8_0 = Quantize(Format::kQ8_0, y, 0.0f, true);
      for (size_t in_offset = 1; in_offset < 4; ++in_offset) {
        for (size_t out_offset = 1; out_offset < 4; ++out_offset) {
          std::vector<float> shifted(n + in_offset);
          std::copy(y.begin(), y.end(), shifted.begin() + std::ptrdiff_t(in_offset));
          const float* in = shifted.data() + in_offset;
          std::vector<uint8_t> out(out_offset + OutputBytes(Format::kQ8_0, n) + n);
          uint8_t* at = out.data() + out_offset;
          float scale = 0.0f;
          HWY_DYNAMIC_DISPATCH(cpu::Int8Row)(in, int64_t(n), reinterpret_cast<int8_t*>(at), &scale);
          EXPECT_TRUE(std::equal(int8.bytes.begin(), int8.bytes.end(), at)) << TargetName(target) << " int8 n " << n;
          HWY_DYNAMIC_DISPATCH(cpu::Fp8Row)(in, int64_t(n), at, &scale, true);
          EXPECT_TRUE(std::equal(fp8.bytes.begin(), fp8.bytes.end(), at)) << TargetName(target) << " fp8 n " << n;
          HWY_DYNAMIC_DISPATCH(cpu::Q8_0Row)(in, int64_t(n), at);
          EXPECT_TRUE(std::equal(q8_0.bytes.begin(), q8_0.bytes.end(), at)) << TargetName(target) << " q8_0 n " << n;
        }
      }
    }
  }
}

// The decoders invert the encodings, and dequantized rows are within half a step of y.
TEST(Quantize, DecodersInvertTheEncoding) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == quant::kE4M3NaNBits) {
      EXPECT_TRUE(std::isnan(ref::DecodeE4M3(uint8_t(code))));
      continue;
    }
    const float value = ref::DecodeE4M3(uint8_t(code));
    EXPECT_EQ(code, ref::EncodeE4M3(value, std::signbit(value))) << code;
  }
  const std::vector<float> y = UniformRow(5, 256, 10.0);
  const Quantized int8 = Quantize(Format::kInt8, y, 0.0f, true);
  std::vector<float> back(y.size());
  ref::DequantizeInt8Row(reinterpret_cast<const int8_t*>(int8.bytes.data()), int64_t(y.size()), int8.scale, back.data());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_LE(std::fabs(back[i] - y[i]), 0.5001 * int8.scale) << i;
  const Quantized q8_0 = Quantize(Format::kQ8_0, y, 0.0f, true);
  ref::DequantizeQ8_0Row(q8_0.bytes.data(), int64_t(y.size()), back.data());
  for (size_t i = 0; i < y.size(); ++i) {
    const float d = ref::DecodeF16(q8_0.Block(i / 32).d);
    EXPECT_EQ(float(q8_0.Block(i / 32).qs[i % 32]) * d, back[i]);
    EXPECT_LE(std::fabs(back[i] - y[i]), 0.5001 * d) << i;
  }
  const Quantized fp8 = Quantize(Format::kFp8Dynamic, y, 0.0f, true);
  ref::DequantizeFp8E4M3Row(fp8.bytes.data(), int64_t(y.size()), fp8.scale, back.data());
  for (size_t i = 0; i < y.size(); ++i) EXPECT_LE(std::fabs(back[i] - y[i]), 0.0626 * std::fabs(y[i]) + 0x1p-10 * fp8.scale) << i;
}

}  // namespace
}  // namespace rmsnorm::test
#endif  // HWY_ONCE
