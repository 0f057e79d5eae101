// The quantized output formats: their ranges, encodings and block layout, written once for the
// reference quantizers (ref/quantize.h) and the SIMD ones (cpu/quantize-inl.h), which must agree on
// every bit of them.
#ifndef RMSNORM_SRC_REF_QUANT_FORMATS_H_
#define RMSNORM_SRC_REF_QUANT_FORMATS_H_

#include <cstddef>
#include <cstdint>

namespace rmsnorm::quant {

// Symmetric int8: q in [-127, 127], so that -q is always representable and the range is symmetric.
constexpr int kInt8Max = 127;

// OCP FP8 E4M3FN (OCP 8-bit Floating Point Specification, OFP8, rev. 1.0): sign, 4 exponent bits of
// bias 7, 3 mantissa bits. No infinities; S.1111.111 is NaN, so the largest finite value is
// S.1111.110 = 1.75 * 2^8 = 448. Exponent field 0 holds the subnormals m * 2^-9 (m = 1..7); the
// smallest normal is 2^-6.
constexpr float kE4M3Max = 448.0f;
constexpr uint8_t kE4M3MaxBits = 0x7E;    // +448; with the sign bit 0xFE is -448
constexpr uint8_t kE4M3NaNBits = 0x7F;    // with the sign bit, 0xFF
constexpr uint8_t kE4M3SignBit = 0x80;
constexpr float kE4M3MinNormal = 0x1p-6f;
constexpr float kE4M3SubnormalStep = 0x1p-9f;

// ggml's q8_0 (ggml/src/ggml-common.h: block_q8_0, QK8_0 = 32): blocks of 32 consecutive elements,
// each stored as an IEEE binary16 scale d followed by the 32 int8 values, q * d reconstructing the
// element. 34 bytes, no padding, so that a row of blocks is ggml's tensor data as it is.
constexpr int64_t kQ8_0BlockSize = 32;
struct BlockQ8_0 {
  uint16_t d;                 // f16 bits
  int8_t qs[kQ8_0BlockSize];  // in [-127, 127]
};
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block: 2 bytes of f16 scale and 32 int8, no padding");
static_assert(offsetof(BlockQ8_0, qs) == 2, "q8_0 block: the values follow the scale");

constexpr uint16_t kF16MaxFiniteBits = 0x7BFF;  // 65504
constexpr uint16_t kF16InfBits = 0x7C00;
constexpr uint16_t kF16NaNBits = 0x7E00;  // the quiet NaN a non-finite block's d is written as

}  // namespace rmsnorm::quant

#endif  // RMSNORM_SRC_REF_QUANT_FORMATS_H_
