// The reference quantizers and their decoders: plain loops, every quotient taken in double and rounded
// once, to nearest with ties to even, straight into the format. The oracle the SIMD quantizers
// (cpu/quantize-inl.h) are tested against; they share its rules for zero rows, NaN, infinities and
// saturation, and differ from it only in rounding y / scale to f32 before rounding to the format.
// The formats themselves are in quant_formats.h.
#ifndef RMSNORM_SRC_REF_QUANTIZE_H_
#define RMSNORM_SRC_REF_QUANTIZE_H_

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "ref/quant_formats.h"

namespace rmsnorm::ref {

// ---- Shared rules -------------------------------------------------------------------------------

// max |y_i| over [0, n) in double, or NaN if any y_i is NaN (0 for n = 0).
inline double MaxMagnitude(const float* y, int64_t n) {
  double max_magnitude = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(y[i])) return std::numeric_limits<double>::quiet_NaN();
    max_magnitude = std::max(max_magnitude, std::fabs(double(y[i])));
  }
  return max_magnitude;
}

// The scale written for a row (or block) whose max|y| is not finite: +inf for an infinity, a quiet NaN
// for a NaN.
inline float NonFiniteScale(double max_magnitude) {
  return std::isnan(max_magnitude) ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
}

// round-to-nearest-even(v) clamped to [-127, 127]. std::nearbyint rounds in the current mode, which is
// the default, to nearest even.
inline int8_t RoundToInt8(double v) {
  const double rounded = std::nearbyint(v);
  return static_cast<int8_t>(std::clamp(rounded, -double(quant::kInt8Max), double(quant::kInt8Max)));
}

// q_i = clamp(rne(y_i / scale)) for a finite scale > 0; all zero for scale 0.
inline void Int8Values(const float* y, int64_t n, float scale, int8_t* q) {
  for (int64_t i = 0; i < n; ++i) q[i] = scale == 0.0f ? 0 : RoundToInt8(double(y[i]) / double(scale));
}

// ---- int8, one f32 scale per row ----------------------------------------------------------------

// y: (n) f32 -> q: (n) int8, *scale: f32, with y ~ q * scale.
// scale = f32(max|y| / 127); q = clamp(rne(y / scale), -127, 127). scale 0 (an all-zero row, or one
// so small that max|y| / 127 underflows) gives q = 0. A row with a NaN gets scale NaN and one with an
// infinity (and no NaN) scale +inf, both with q = 0: such a row has no int8 form, and dequantizing it
// gives NaN throughout, as the norm's own output does for a row with a NaN.
inline void QuantizeInt8Row(const float* y, int64_t n, int8_t* q, float* scale) {
  const double max_magnitude = MaxMagnitude(y, n);
  if (!std::isfinite(max_magnitude)) {
    *scale = NonFiniteScale(max_magnitude);
    std::fill(q, q + n, int8_t{0});
    return;
  }
  // Rounding the double quotient to f32 gives the correctly rounded f32 quotient: double has more than
  // twice f32's precision, so the double rounding is innocuous for a division.
  *scale = static_cast<float>(max_magnitude / quant::kInt8Max);
  Int8Values(y, n, *scale, q);
}

// q: (n) int8, scale -> out: (n) f32, out_i = q_i * scale rounded to f32.
inline void DequantizeInt8Row(const int8_t* q, int64_t n, float scale, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = float(q[i]) * scale;
}

// ---- fp8 E4M3FN ---------------------------------------------------------------------------------

// The value of an E4M3 encoding (NaN for S.1111.111).
inline float DecodeE4M3(uint8_t bits) {
  if ((bits & 0x7F) == quant::kE4M3NaNBits) return std::numeric_limits<float>::quiet_NaN();
  const int exponent = (bits >> 3) & 0xF, mantissa = bits & 0x7;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  return static_cast<float>((bits & quant::kE4M3SignBit) ? -magnitude : magnitude);
}

// The encoding nearest to v, found by comparing distances to the representable values (ties to the
// even encoding), saturating: every magnitude above 448, infinity included, is 448. NaN is S.1111.111.
// The sign bit is given separately, so that zeros and NaNs carry the quotient's sign rule (below).
inline uint8_t EncodeE4M3(double v, bool negative) {
  const uint8_t sign = negative ? quant::kE4M3SignBit : 0;
  if (std::isnan(v)) return sign | quant::kE4M3NaNBits;
  const double magnitude = std::fabs(v);
  if (magnitude >= quant::kE4M3Max) return sign | quant::kE4M3MaxBits;
  static const std::array<double, quant::kE4M3MaxBits + 1> values = [] {
    std::array<double, quant::kE4M3MaxBits + 1> table{};
    for (int code = 0; code <= quant::kE4M3MaxBits; ++code) table[size_t(code)] = DecodeE4M3(uint8_t(code));
    return table;
  }();
  const size_t above = size_t(std::lower_bound(values.begin(), values.end(), magnitude) - values.begin());
  if (values[above] == magnitude) return sign | uint8_t(above);
  const size_t below = above - 1;  // magnitude > 0 = values[0] here
  const double to_below = magnitude - values[below], to_above = values[above] - magnitude;
  const size_t nearest = to_below < to_above ? below : to_above < to_below ? above : (below % 2 == 0 ? below : above);
  return sign | uint8_t(nearest);
}

// Each q_i is y_i / scale encoded; its sign bit is sign(y_i) XOR sign(scale), which is the quotient's
// sign wherever the quotient is not NaN, and gives NaN results a sign that does not depend on the CPU.
inline void E4M3Values(const float* y, int64_t n, float scale, uint8_t* q) {
  for (int64_t i = 0; i < n; ++i)
    q[i] = EncodeE4M3(double(y[i]) / double(scale), std::signbit(y[i]) != std::signbit(scale));
}

// y: (n) f32 -> q: (n) E4M3 bytes; *scale_inout: f32, with y ~ decode(q) * scale.
// dynamic: scale = f32(max|y| / 448), written to *scale_inout. scale 0 (all-zero row, or underflow)
//   gives q = 0x00; a row with a NaN gets scale NaN, one with an infinity scale +inf, both with every
//   q = NaN (0x7F).
// static: the caller's *scale_inout (finite and > 0; the C ABI refuses others) is read, and q is the
//   formula's for any scale.
// q = encode(y / scale): nearest even, saturating to +-448 (0x7E / 0xFE) beyond range and for
// infinities, NaN -> 0x7F / 0xFF.
inline void QuantizeFp8E4M3Row(const float* y, int64_t n, uint8_t* q, float* scale_inout, bool dynamic) {
  if (dynamic) {
    const double max_magnitude = MaxMagnitude(y, n);
    if (!std::isfinite(max_magnitude)) {
      *scale_inout = NonFiniteScale(max_magnitude);
      std::fill(q, q + n, quant::kE4M3NaNBits);
      return;
    }
    *scale_inout = static_cast<float>(max_magnitude / quant::kE4M3Max);
    if (*scale_inout == 0.0f) {
      std::fill(q, q + n, uint8_t{0});
      return;
    }
  }
  E4M3Values(y, n, *scale_inout, q);
}

// q: (n) E4M3 bytes, scale -> out: (n) f32, out_i = decode(q_i) * scale rounded to f32.
inline void DequantizeFp8E4M3Row(const uint8_t* q, int64_t n, float scale, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = DecodeE4M3(q[i]) * scale;
}

// ---- ggml q8_0 ----------------------------------------------------------------------------------

// The f16 encoding nearest to v >= 0 (ties to even), found from v's binade in double, saturating at
// the largest finite f16, 65504.
inline uint16_t NearestF16Saturating(double v) {
  if (v >= 65504.0) return quant::kF16MaxFiniteBits;
  if (v < 0x1p-14) return static_cast<uint16_t>(std::nearbyint(v * 0x1p24));  // subnormal steps of 2^-24
  int binade;
  std::frexp(v, &binade);  // v in [2^(binade-1), 2^binade)
  const int exponent = binade - 1;
  const double steps = std::nearbyint(std::ldexp(v, 10 - exponent));  // in [1024, 2048]
  return static_cast<uint16_t>(((exponent + 15) << 10) + int(steps) - 1024);  // 2048 carries into the exponent
}

inline float DecodeF16(uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1F, mantissa = bits & 0x3FF;
  const double sign = (bits & 0x8000) ? -1.0 : 1.0;
  if (exponent == 31) return mantissa ? std::numeric_limits<float>::quiet_NaN() : float(sign * INFINITY);
  if (exponent == 0) return float(sign * std::ldexp(mantissa, -24));
  return float(sign * std::ldexp(1024 + mantissa, exponent - 25));
}

// y: (n) f32, n a multiple of 32 -> blocks: (n / 32) quant::BlockQ8_0.
// Per block: d = f16(max|y| / 127) rounded to nearest even (saturating at 65504), and
// q = clamp(rne(y / d), -127, 127) with d the stored f16 value, so that q * d is the nearest such
// product to y; d = 0 gives q = 0. A block with a NaN gets d = NaN (0x7E00), one with an infinity
// d = +inf (0x7C00), both with q = 0.
inline void QuantizeQ8_0Row(const float* y, int64_t n, void* blocks) {
  auto* out = static_cast<quant::BlockQ8_0*>(blocks);
  for (int64_t b = 0; b < n / quant::kQ8_0BlockSize; ++b) {
    const float* block_y = y + b * quant::kQ8_0BlockSize;
    quant::BlockQ8_0 block{};
    const double max_magnitude = MaxMagnitude(block_y, quant::kQ8_0BlockSize);
    if (!std::isfinite(max_magnitude)) {
      block.d = std::isnan(max_magnitude) ? quant::kF16NaNBits : quant::kF16InfBits;
    } else {
      block.d = NearestF16Saturating(max_magnitude / quant::kInt8Max);
      Int8Values(block_y, quant::kQ8_0BlockSize, DecodeF16(block.d), block.qs);
    }
    std::memcpy(&out[b], &block, sizeof block);
  }
}

// blocks: (n / 32) quant::BlockQ8_0 -> out: (n) f32, out_i = q_i * d (exact in f32).
inline void DequantizeQ8_0Row(const void* blocks, int64_t n, float* out) {
  const auto* in = static_cast<const quant::BlockQ8_0*>(blocks);
  for (int64_t i = 0; i < n; ++i) {
    quant::BlockQ8_0 block;
    std::memcpy(&block, &in[i / quant::kQ8_0BlockSize], sizeof block);
    out[i] = float(block.qs[i % quant::kQ8_0BlockSize]) * DecodeF16(block.d);
  }
}

}  // namespace rmsnorm::ref

#endif  // RMSNORM_SRC_REF_QUANTIZE_H_
