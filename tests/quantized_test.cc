// The quantized forwards (rmsnorm_forward_quantized, rmsnorm_add_forward_quantized): every format,
// dtype, plain or fused add, packed or strided rows, on every SIMD target and both backends.
//
// What is asserted:
// - the kernels write the same bytes and scales on every target, packed or strided, with any thread
//   count, and touch nothing between strided rows; residual_out and rstd are the plain call's bits;
// - the kernels' bytes are the row quantizers' (src/ref/quantize.h, held to cpu/quantize-inl.h by
//   quantize_test.cc) applied to the f32 y the plain f32 forward writes for the same rows: scales
//   bit for bit, values equal or one step apart where the f32 quotient y / scale crosses a midpoint;
// - the reference backend's bytes are the reference quantizers' applied to its own f32 y, exactly;
// - against the reference backend, whose y differs from the kernels' within the forward's tolerance:
//   scales within that tolerance, values equal or one step apart only where the tolerance reaches a
//   rounding midpoint, and every dequantized value within half a step (plus the tolerance) of the
//   reference's y;
// - bad formats, scale pointers and values, lengths and overlaps are refused with nothing written;
//   rows = 0 succeeds.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "raw_format_calls.h"
#include "ref/quant_formats.h"
#include "ref/quantize.h"
#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"
#include "test_util.h"

namespace rmsnorm::test {
namespace {

constexpr uint8_t kGuardByte = 0xA5;
constexpr float kStaticScale = 0x1p-6f;  // the rows' |y| stay below 448 of it

const registry::QuantFormatInfo& Format(rmsnorm_quant_format code) { return *registry::FindQuantFormat(code); }

uint32_t Bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

struct QuantCase {
  rmsnorm_quant_format format = RMSNORM_QUANT_INT8_ROW;
  rmsnorm_dtype dtype = RMSNORM_F32;
  bool add = false;
  bool strided = false;
  int64_t rows = 5;
  int64_t cols = 0;  // 0: 160 for q8_0, 131 for the others (a partial last vector)
  uint32_t seed = 7;

  int64_t Cols() const { return cols != 0 ? cols : (format == RMSNORM_QUANT_Q8_0 ? 160 : 131); }
  int64_t QCols() const { return Cols() / Format(format).unit_cols; }
  // Row strides: packed, or with gaps (x, residual, residual_out: 3 elements; q: 5 of its own).
  int64_t RowStride() const { return Cols() + (strided ? 3 : 0); }
  int64_t QRowStride() const { return QCols() + (strided ? 5 : 0); }
  Case Base() const {
    Case c;
    c.op = add ? registry::Norm::kAddRmsNorm : registry::Norm::kRmsNorm;
    c.dtype = dtype;
    c.rows = rows;
    c.cols = Cols();
    c.weight = true;
    c.bias = add;  // without a bias the zero row normalizes to zeros: scale 0
    c.seed = seed;
    return c;
  }
  std::string Name() const {
    std::ostringstream s;
    s << Format(format).name << " " << DtypeName(dtype) << (add ? " add" : "") << (strided ? " strided" : "") << " "
      << rows << "x" << Cols();
    return s.str();
  }
};

// The case's inputs, with row 1 all zero (x and residual).
Inputs MakeQuantInputs(const QuantCase& qc) {
  Inputs in = MakeInputs(qc.Base());
  for (int64_t i = 0; qc.rows > 1 && i < qc.Cols(); ++i) {
    in.x.set(qc.Cols() + i, 0.0);
    in.residual.set(qc.Cols() + i, 0.0);
  }
  return in;
}

// A call's outputs, gathered packed.
struct QuantResult {
  std::vector<uint8_t> q;  // (rows, qcols * unit_bytes)
  std::vector<float> scales;
  RowTensor residual_out;
  std::vector<float> rstd;
  bool gaps_untouched = true;
};

// A row tensor stored with `stride` elements a row.
std::vector<uint8_t> Spread(const RowTensor& t, int64_t rows, int64_t cols, int64_t stride) {
  const size_t size = registry::DtypeSize(t.dtype());
  std::vector<uint8_t> out(size_t(((rows - 1) * stride + cols)) * size, kGuardByte);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(out.data() + r * stride * int64_t(size), static_cast<const uint8_t*>(t.data()) + r * cols * int64_t(size),
                size_t(cols) * size);
  return out;
}

bool GapsUntouched(const std::vector<uint8_t>& buffer, int64_t rows, size_t row_bytes, size_t stride_bytes) {
  for (int64_t r = 0; r < rows; ++r)
    for (size_t b = row_bytes; b < stride_bytes && r * stride_bytes + b < buffer.size(); ++b)
      if (buffer[r * stride_bytes + b] != kGuardByte) return false;
  return true;
}

rmsnorm_config_ex Config(const QuantCase& qc) {
  rmsnorm_config_ex config = rmsnorm_config_ex_init(qc.rows, qc.Cols());
  config.base.dtype = qc.dtype;
  if (qc.strided) {
    config.x.outer = config.residual.outer = config.residual_out.outer = qc.RowStride();
    config.y.outer = qc.QRowStride();
  }
  return config;
}

// Runs the case on the backend the process has selected.
QuantResult RunQuantized(const QuantCase& qc, const Inputs& in) {
  const registry::QuantFormatInfo& f = Format(qc.format);
  const int64_t rows = qc.rows, cols = qc.Cols();
  const rmsnorm_config_ex config = Config(qc);
  std::vector<uint8_t> x = Spread(in.x, rows, cols, qc.RowStride());
  std::vector<uint8_t> residual = Spread(in.residual, rows, cols, qc.RowStride());
  std::vector<uint8_t> residual_out(residual.size(), kGuardByte);
  const size_t q_row_bytes = size_t(qc.QCols()) * f.unit_bytes, q_stride_bytes = size_t(qc.QRowStride()) * f.unit_bytes;
  std::vector<uint8_t> q(size_t(rows - 1) * q_stride_bytes + q_row_bytes + 64, kGuardByte);
  QuantResult out;
  out.rstd.assign(size_t(rows), -1.0f);
  std::vector<float> scales;
  if (f.scales == registry::QuantScales::kPerRow) scales.assign(size_t(rows), -1.0f);
  if (f.scales == registry::QuantScales::kStatic) scales.assign(1, kStaticScale);
  float* scales_arg = scales.empty() ? nullptr : scales.data();
  const float* bias = in.bias.empty() ? nullptr : in.bias.data();
  const rmsnorm_status status =
      qc.add ? rmsnorm_add_forward_quantized(&config, qc.format, x.data(), residual.data(), in.weight.data(), bias,
                                             q.data(), scales_arg, residual_out.data(), out.rstd.data())
             : rmsnorm_forward_quantized(&config, qc.format, x.data(), in.weight.data(), bias, q.data(), scales_arg,
                                         out.rstd.data());
  EXPECT_EQ(status, RMSNORM_OK) << qc.Name() << ": " << rmsnorm_last_error();
  for (int64_t r = 0; r < rows; ++r)
    out.q.insert(out.q.end(), q.begin() + r * q_stride_bytes, q.begin() + r * q_stride_bytes + q_row_bytes);
  out.gaps_untouched = GapsUntouched(q, rows, q_row_bytes, q_stride_bytes) &&
                       std::all_of(q.end() - 64, q.end(), [](uint8_t b) { return b == kGuardByte; });
  if (f.scales == registry::QuantScales::kPerRow) out.scales = scales;
  if (f.scales == registry::QuantScales::kStatic) {
    EXPECT_EQ(scales[0], kStaticScale) << qc.Name() << ": the static scale is read only";
    out.scales.assign(size_t(rows), kStaticScale);
  }
  if (f.scales == registry::QuantScales::kInBlocks) out.scales.assign(size_t(rows), 0.0f);  // the blocks have them
  if (qc.add) {
    const size_t size = registry::DtypeSize(qc.dtype);
    out.residual_out = RowTensor(qc.dtype, rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<uint8_t*>(out.residual_out.data()) + r * cols * int64_t(size),
                  residual_out.data() + r * qc.RowStride() * int64_t(size), size_t(cols) * size);
    out.gaps_untouched = out.gaps_untouched && GapsUntouched(residual_out, rows, size_t(cols) * size,
                                                             size_t(qc.RowStride()) * size);
  }
  return out;
}

QuantResult RunQuantized(const QuantCase& qc, const Inputs& in, rmsnorm_backend backend) {
  const rmsnorm_backend saved = rmsnorm_get_backend();
  rmsnorm_set_backend(backend);
  QuantResult r = RunQuantized(qc, in);
  rmsnorm_set_backend(saved);
  return r;
}

// The rows the forward normalizes, in f32 (x, or the stored x + residual): the f32 case on them is the
// plain RMSNorm whose y the quantized call quantizes.
struct F32Rows {
  Case c;
  Inputs in;
};
F32Rows NormalizedRowsInF32(const QuantCase& qc, const Inputs& in, const QuantResult& got) {
  F32Rows f;
  f.c = qc.Base();
  f.c.op = registry::Norm::kRmsNorm;
  f.c.dtype = RMSNORM_F32;
  f.in = in;
  f.in.x = RowTensor(RMSNORM_F32, qc.rows, qc.Cols());
  const RowTensor& source = qc.add ? got.residual_out : in.x;
  for (int64_t i = 0; i < source.size(); ++i) f.in.x.set(i, source.get(i));
  return f;
}

// Row r of an f32 RowTensor.
std::vector<float> RowOf(const RowTensor& t, int64_t r, int64_t cols) {
  std::vector<float> row(static_cast<size_t>(cols));
  for (int64_t i = 0; i < cols; ++i) row[size_t(i)] = float(t.get(r * cols + i));
  return row;
}

// The reference quantizers on one row: bytes and scale.
void ReferenceQuantize(rmsnorm_quant_format format, const std::vector<float>& y, std::vector<uint8_t>* q, float* scale) {
  const auto n = int64_t(y.size());
  q->assign(size_t(n / Format(format).unit_cols) * Format(format).unit_bytes, 0);
  switch (format) {
    case RMSNORM_QUANT_INT8_ROW: return ref::QuantizeInt8Row(y.data(), n, reinterpret_cast<int8_t*>(q->data()), scale);
    case RMSNORM_QUANT_FP8_E4M3_ROW: return ref::QuantizeFp8E4M3Row(y.data(), n, q->data(), scale, true);
    case RMSNORM_QUANT_FP8_E4M3_STATIC:
      *scale = kStaticScale;
      return ref::QuantizeFp8E4M3Row(y.data(), n, q->data(), scale, false);
    case RMSNORM_QUANT_Q8_0: *scale = 0.0f; return ref::QuantizeQ8_0Row(y.data(), n, q->data());
  }
}

// Element i of a row: its value (dequantized), the scale it uses, the neighbouring value's distance
// (one step towards want), and whether got and want are one step apart.
struct Element {
  double value, scale;
};
Element Dequantize(rmsnorm_quant_format format, const uint8_t* row, float row_scale, int64_t i) {
  if (format == RMSNORM_QUANT_Q8_0) {
    quant::BlockQ8_0 block;
    std::memcpy(&block, row + (i / 32) * int64_t(sizeof block), sizeof block);
    const double d = ref::DecodeF16(block.d);
    return {block.qs[i % 32] * d, d};
  }
  if (format == RMSNORM_QUANT_INT8_ROW) return {static_cast<int8_t>(row[i]) * double(row_scale), row_scale};
  return {double(ref::DecodeE4M3(row[i])) * row_scale, row_scale};
}
// One step apart: adjacent int8 values, or adjacent E4M3 encodings of one sign.
bool OneStep(rmsnorm_quant_format format, const uint8_t* got, const uint8_t* want, int64_t i) {
  if (format == RMSNORM_QUANT_Q8_0) {
    const int64_t at = (i / 32) * 34 + 2 + i % 32;
    return std::abs(int(int8_t(got[at])) - int(int8_t(want[at]))) == 1;
  }
  if (format == RMSNORM_QUANT_INT8_ROW) return std::abs(int(int8_t(got[i])) - int(int8_t(want[i]))) == 1;
  const int g = got[i], w = want[i];
  return ((g ^ w) & 0x80) == 0 && (g & 0x7F) != 0x7F && (w & 0x7F) != 0x7F && std::abs((g & 0x7F) - (w & 0x7F)) == 1;
}
bool SameValue(rmsnorm_quant_format format, const uint8_t* got, const uint8_t* want, int64_t i) {
  const int64_t at = format == RMSNORM_QUANT_Q8_0 ? (i / 32) * 34 + 2 + i % 32 : i;
  return got[at] == want[at];
}

// Empty if the kernel's row (got, got_scale) is the reference quantizers' on y, as the top says.
std::string CompareToQuantizer(rmsnorm_quant_format format, const std::vector<float>& y, const uint8_t* got,
                               float got_scale, size_t* one_step) {
  std::vector<uint8_t> want;
  float want_scale = 0.0f;
  ReferenceQuantize(format, y, &want, &want_scale);
  if (format != RMSNORM_QUANT_Q8_0 && Bits(got_scale) != Bits(want_scale))
    return "scale " + std::to_string(got_scale) + ", the quantizer's " + std::to_string(want_scale);
  for (size_t b = 0; format == RMSNORM_QUANT_Q8_0 && b < want.size(); b += 34)
    if (std::memcmp(got + b, want.data() + b, 2) != 0) return "block " + std::to_string(b / 34) + ": d differs";
  for (int64_t i = 0; i < int64_t(y.size()); ++i) {
    if (SameValue(format, got, want.data(), i)) continue;
    const Element g = Dequantize(format, got, got_scale, i), w = Dequantize(format, want.data(), want_scale, i);
    const double scale = g.scale;
    const double exact = double(y[size_t(i)]) / scale, f32 = double(y[size_t(i)] / float(scale));
    const double midpoint = (g.value + w.value) / 2 / scale;
    if (OneStep(format, got, want.data(), i) && exact != f32 && (midpoint - exact) * (midpoint - f32) <= 0.0) {
      ++*one_step;
      continue;
    }
    std::ostringstream s;
    s.precision(9);
    s << "element " << i << ": " << g.value << ", the quantizer's " << w.value << " for y " << y[size_t(i)];
    return s.str();
  }
  return "";
}

// Half the distance to the format's neighbouring values at magnitude v (in units of the scale).
double HalfStep(rmsnorm_quant_format format, double v) {
  if (format == RMSNORM_QUANT_INT8_ROW || format == RMSNORM_QUANT_Q8_0) return 0.5;
  v = std::fabs(v);
  if (v < quant::kE4M3MinNormal) return quant::kE4M3SubnormalStep / 2;
  return std::ldexp(1.0, std::ilogb(v)) / 16;  // 3 mantissa bits
}

// The kernels' row against the reference backend's: see the top.
std::string CompareToReferenceBackend(rmsnorm_quant_format format, const std::vector<float>& y_ref,
                                      const std::vector<double>& y_tolerance, const uint8_t* got, float got_scale,
                                      const uint8_t* want, float want_scale) {
  const int64_t n = int64_t(y_ref.size());
  double max_tolerance = 0.0;
  for (double t : y_tolerance) max_tolerance = std::max(max_tolerance, t);
  std::ostringstream s;
  s.precision(9);
  if (format == RMSNORM_QUANT_INT8_ROW || format == RMSNORM_QUANT_FP8_E4M3_ROW) {
    const double divisor = format == RMSNORM_QUANT_INT8_ROW ? 127.0 : 448.0;
    if (std::fabs(double(got_scale) - want_scale) > max_tolerance / divisor + 2 * Ulp(RMSNORM_F32, want_scale)) {
      s << "scale " << got_scale << ", reference " << want_scale;
      return s.str();
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const Element g = Dequantize(format, got, got_scale, i), w = Dequantize(format, want, want_scale, i);
    const double tolerance = y_tolerance[size_t(i)];
    const double y = y_ref[size_t(i)];
    // Dequantized within half a step of the reference's y, give or take the y tolerance. A zero scale (an
    // all-zero row) has no steps; 0/0 must not reach HalfStep: ilogb(NaN) is INT_MIN on x86-64, INT_MAX on aarch64.
    const double half_step = g.scale == 0.0 ? 0.0 : HalfStep(format, y / g.scale) * g.scale;
    const double bound = half_step * (1 + 0x1p-20) + tolerance + std::fabs(y) * 0x1p-22;
    if (!(std::fabs(g.value - y) <= bound)) {
      s << "element " << i << ": dequantized " << g.value << ", reference y " << y << " (bound " << bound << ")";
      return s.str();
    }
    if (SameValue(format, got, want, i) && (format != RMSNORM_QUANT_Q8_0 || g.scale == w.scale)) continue;
    if (format == RMSNORM_QUANT_Q8_0 && g.scale != w.scale) continue;  // d one f16 step off: the bound above
    // One step apart only where the y tolerance and the scales' difference reach the midpoint.
    const double u = y / w.scale, midpoint = (g.value / g.scale + w.value / w.scale) / 2;
    const double slack = tolerance / w.scale + std::fabs(u) * (std::fabs(g.scale - w.scale) / w.scale + 0x1p-22) + 0x1p-30;
    if (!(OneStep(format, got, want, i) && std::fabs(u - midpoint) <= slack)) {
      s << "element " << i << ": " << g.value << ", reference " << w.value << " for y " << y << " (midpoint "
        << midpoint << ", quotient " << u << ", slack " << slack << ")";
      return s.str();
    }
  }
  return "";
}

std::vector<QuantCase> AllCases() {
  std::vector<QuantCase> cases;
  for (const registry::QuantFormatInfo& f : registry::kQuantFormats)
    for (rmsnorm_dtype dtype : AllDtypes())
      for (bool add : {false, true})
        for (bool strided : {false, true}) {
          QuantCase qc;
          qc.format = f.code;
          qc.dtype = dtype;
          qc.add = add;
          qc.strided = strided;
          cases.push_back(qc);
        }
  return cases;
}

size_t RowBytes(const QuantCase& qc) { return size_t(qc.QCols()) * Format(qc.format).unit_bytes; }

// The quantized forward on every target: the same bits on each (q, scales, rstd, residual_out), and
// nothing written between q's rows. Returns the first target's.
QuantResult QuantizedOnEveryTarget(const QuantCase& qc, const Inputs& in) {
  QuantResult first;
  bool have_first = false;
  for (int64_t target : AvailableTargets()) {
    ScopedTarget scoped(target);
    const QuantResult got = RunQuantized(qc, in, RMSNORM_BACKEND_AUTO);
    EXPECT_TRUE(got.gaps_untouched) << TargetName(target) << " wrote outside q's rows";
    if (!have_first) {
      first = got;
      have_first = true;
      continue;
    }
    EXPECT_EQ(got.q, first.q) << TargetName(target);
    EXPECT_EQ(std::memcmp(got.scales.data(), first.scales.data(), got.scales.size() * sizeof(float)), 0)
        << TargetName(target);
    EXPECT_EQ(std::memcmp(got.rstd.data(), first.rstd.data(), got.rstd.size() * sizeof(float)), 0)  // NaN rows too
        << TargetName(target);
    if (qc.add) EXPECT_TRUE(got.residual_out.BitwiseEqual(first.residual_out)) << TargetName(target);
  }
  return first;
}

TEST(Quantized, EveryFormatDtypeAndLayoutOnEveryTarget) {
  size_t one_step = 0;
  for (const QuantCase& qc : AllCases()) {
    SCOPED_TRACE(qc.Name());
    const Inputs in = MakeQuantInputs(qc);
    const int64_t cols = qc.Cols();
    // The kernels on every target, and the layout's twin, give the same bits.
    const QuantResult first = QuantizedOnEveryTarget(qc, in);
    QuantCase twin = qc;
    twin.strided = !qc.strided;
    const QuantResult other_layout = RunQuantized(twin, in, RMSNORM_BACKEND_AUTO);
    EXPECT_EQ(other_layout.q, first.q) << "packed and strided differ";

    // residual_out and rstd are the plain call's; q is the quantizers' on the plain f32 y.
    const Outputs plain = RunForward(qc.Base(), in, RMSNORM_BACKEND_AUTO);
    EXPECT_EQ(std::memcmp(plain.rstd.data(), first.rstd.data(), first.rstd.size() * sizeof(float)), 0);
    if (qc.add) EXPECT_TRUE(plain.residual_out.BitwiseEqual(first.residual_out));
    const F32Rows f32 = NormalizedRowsInF32(qc, in, first);
    const Outputs kernel_y = RunForward(f32.c, f32.in, RMSNORM_BACKEND_AUTO);
    const Outputs ref_y = RunForward(f32.c, f32.in, RMSNORM_BACKEND_REFERENCE);
    const Tolerances tolerances = ForwardTolerances(f32.c, f32.in, ref_y);
    const QuantResult ref = RunQuantized(qc, in, RMSNORM_BACKEND_REFERENCE);
    EXPECT_TRUE(ref.gaps_untouched) << "the reference wrote outside q's rows";
    for (int64_t r = 0; r < qc.rows; ++r) {
      SCOPED_TRACE("row " + std::to_string(r));
      const uint8_t* got = first.q.data() + size_t(r) * RowBytes(qc);
      const uint8_t* want = ref.q.data() + size_t(r) * RowBytes(qc);
      EXPECT_EQ(CompareToQuantizer(qc.format, RowOf(kernel_y.y, r, cols), got, first.scales[size_t(r)], &one_step), "");
      size_t reference_steps = 0;
      EXPECT_EQ(CompareToQuantizer(qc.format, RowOf(ref_y.y, r, cols), want, ref.scales[size_t(r)], &reference_steps), "");
      EXPECT_EQ(reference_steps, 0u) << "the reference backend is the reference quantizers on its y, exactly";
      const std::vector<double> row_tolerance(tolerances.y.begin() + r * cols, tolerances.y.begin() + (r + 1) * cols);
      EXPECT_EQ(CompareToReferenceBackend(qc.format, RowOf(ref_y.y, r, cols), row_tolerance, got, first.scales[size_t(r)],
                                          want, ref.scales[size_t(r)]),
                "");
    }
    if (qc.format != RMSNORM_QUANT_FP8_E4M3_STATIC && !qc.add) {
      EXPECT_EQ(first.scales[1], 0.0f) << "an all-zero row";
      EXPECT_TRUE(std::all_of(first.q.begin() + RowBytes(qc), first.q.begin() + 2 * RowBytes(qc),
                              [](uint8_t b) { return b == 0; }) ||
                  qc.format == RMSNORM_QUANT_Q8_0)
          << "an all-zero row quantizes to zeros";
    }
  }
  std::printf("values one step from the quantizers' on the plain y (f32 quotient at a midpoint): %zu\n", one_step);
}

// qc on one thread and on four: the same q and scales, and each row the quantizer's bytes on the plain
// forward's f32 y.
void ExpectThreadsAndQuantizerAgree(const QuantCase& qc) {
  SCOPED_TRACE(qc.Name());
  const Inputs in = MakeQuantInputs(qc);
  QuantResult one, many;
  {
    ScopedThreads threads(1);
    one = RunQuantized(qc, in, RMSNORM_BACKEND_AUTO);
  }
  {
    ScopedThreads threads(4);
    many = RunQuantized(qc, in, RMSNORM_BACKEND_AUTO);
  }
  EXPECT_EQ(one.q, many.q);
  EXPECT_EQ(std::memcmp(one.scales.data(), many.scales.data(), one.scales.size() * sizeof(float)), 0);
  const F32Rows f32 = NormalizedRowsInF32(qc, in, one);
  const Outputs kernel_y = RunForward(f32.c, f32.in, RMSNORM_BACKEND_AUTO);
  size_t one_step = 0;
  for (int64_t r = 0; r < qc.rows; ++r)
    EXPECT_EQ(CompareToQuantizer(qc.format, RowOf(kernel_y.y, r, qc.Cols()), one.q.data() + size_t(r) * RowBytes(qc),
                                 one.scales[size_t(r)], &one_step),
              "");
}

TEST(Quantized, LongRowsOverSeveralChunksAndThreads) {
  for (rmsnorm_quant_format format : {RMSNORM_QUANT_INT8_ROW, RMSNORM_QUANT_Q8_0}) {
    QuantCase qc;
    qc.format = format;
    qc.dtype = RMSNORM_BF16;
    qc.rows = 3;
    qc.cols = 16384 + 96;  // two reduction chunks
    ExpectThreadsAndQuantizerAgree(qc);
  }
  // Many rows, more bytes than the kernels take for cache-resident (so the next rows' prefetches run
  // beside the quantizing): threads over row blocks.
  for (rmsnorm_quant_format format : {RMSNORM_QUANT_FP8_E4M3_ROW, RMSNORM_QUANT_INT8_ROW, RMSNORM_QUANT_Q8_0}) {
    QuantCase qc;
    qc.format = format;
    qc.rows = 300;
    qc.cols = 1024;
    ExpectThreadsAndQuantizerAgree(qc);
  }
}

// Rows the kernels take in double (a statistic beyond f32's range) and rows with an infinity or a NaN:
// still the quantizers' bytes on the plain forward's f32 y, the same on every target.
TEST(Quantized, RareAndNonFiniteRowsAreThePlainForwardQuantized) {
  const double kInf = std::numeric_limits<double>::infinity(), kNaN = std::numeric_limits<double>::quiet_NaN();
  for (const registry::QuantFormatInfo& f : registry::kQuantFormats)
    for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16})
      for (bool add : {false, true}) {
        QuantCase qc;
        qc.format = f.code;
        qc.dtype = dtype;
        qc.add = add;
        qc.rows = 5;
        qc.cols = f.code == RMSNORM_QUANT_Q8_0 ? 64 : 67;
        SCOPED_TRACE(qc.Name());
        Inputs in = MakeQuantInputs(qc);
        const int64_t cols = qc.Cols();
        in.x.set(0 * cols + 3, kInf);
        in.x.set(2 * cols + 5, kNaN);
        for (int64_t i = 0; i < cols; ++i) {
          in.x.set(3 * cols + i, in.x.get(3 * cols + i) * 1e30);  // squares beyond f32
          in.residual.set(3 * cols + i, in.residual.get(3 * cols + i) * 1e30);
          in.x.set(4 * cols + i, in.x.get(4 * cols + i) * 1e-30);  // a row below eps
          in.residual.set(4 * cols + i, in.residual.get(4 * cols + i) * 1e-30);
        }
        const QuantResult first = QuantizedOnEveryTarget(qc, in);
        const F32Rows f32 = NormalizedRowsInF32(qc, in, first);
        const Outputs kernel_y = RunForward(f32.c, f32.in, RMSNORM_BACKEND_AUTO);
        size_t one_step = 0;
        for (int64_t r = 0; r < qc.rows; ++r)
          EXPECT_EQ(CompareToQuantizer(qc.format, RowOf(kernel_y.y, r, cols), first.q.data() + size_t(r) * RowBytes(qc),
                                       first.scales[size_t(r)], &one_step),
                    "")
              << "row " << r;
      }
}

// ---- Refusals -----------------------------------------------------------------------------------

// A call on one buffer, its tensors at offsets in floats (q in bytes); -1 for NULL.
struct BadCall {
  rmsnorm_config_ex config = rmsnorm_config_ex_init(4, 64);
  int format = RMSNORM_QUANT_INT8_ROW;
  std::vector<float> buffer = std::vector<float>(4096, 0.5f);
  std::vector<float> weight = std::vector<float>(64, 1.0f);
  int64_t x = 0, residual = 512, residual_out = 1024, scales = 2048, rstd = 2100;
  int64_t q = 1536 * 4;
  bool add = false;

  float* At(int64_t i) { return i < 0 ? nullptr : buffer.data() + i; }
  rmsnorm_status Call() {
    void* q_data = q < 0 ? nullptr : reinterpret_cast<uint8_t*>(buffer.data()) + q;
    return add ? rmsnorm_test_add_forward_quantized(&config, format, At(x), At(residual), weight.data(), nullptr,
                                                    q_data, At(scales), At(residual_out), At(rstd))
               : rmsnorm_test_forward_quantized(&config, format, At(x), weight.data(), nullptr, q_data, At(scales),
                                                At(rstd));
  }
};

// The call is refused with a message containing `what`, and the buffer is as it was.
void ExpectRefused(BadCall call, const std::string& what) {
  const std::vector<float> before = call.buffer;
  const rmsnorm_status status = call.Call();
  EXPECT_EQ(status, RMSNORM_ERROR_INVALID_ARGUMENT) << what;
  EXPECT_NE(std::string(rmsnorm_last_error()).find(what), std::string::npos) << rmsnorm_last_error();
  EXPECT_EQ(std::memcmp(before.data(), call.buffer.data(), before.size() * sizeof(float)), 0) << what << ": wrote";
}

TEST(Quantized, RefusesBadInputWritingNothing) {
  for (rmsnorm_backend backend : {RMSNORM_BACKEND_AUTO, RMSNORM_BACKEND_REFERENCE}) {
    ASSERT_EQ(rmsnorm_set_backend(backend), RMSNORM_OK);
    for (bool add : {false, true}) {
      SCOPED_TRACE(std::string(add ? "add" : "plain") + (backend == RMSNORM_BACKEND_REFERENCE ? " reference" : ""));
      BadCall ok;
      ok.add = add;
      {
        BadCall c = ok;
        EXPECT_EQ(c.Call(), RMSNORM_OK) << rmsnorm_last_error();
      }
      for (int format : {0, 5, -1}) {
        BadCall c = ok;
        c.format = format;
        ExpectRefused(c, "format is not an rmsnorm_quant_format");
      }
      BadCall c = ok;
      c.scales = -1;
      ExpectRefused(c, "scales is NULL; RMSNORM_QUANT_INT8_ROW");
      c = ok;
      c.format = RMSNORM_QUANT_FP8_E4M3_STATIC;
      c.scales = -1;
      ExpectRefused(c, "scales is NULL; RMSNORM_QUANT_FP8_E4M3_STATIC");
      for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
        c = ok;
        c.format = RMSNORM_QUANT_FP8_E4M3_STATIC;
        c.buffer[size_t(ok.scales)] = bad;
        ExpectRefused(c, "the static scale *scales must be finite and > 0");
      }
      c = ok;
      c.format = RMSNORM_QUANT_Q8_0;
      ExpectRefused(c, "scales must be NULL for RMSNORM_QUANT_Q8_0");
      c.scales = -1;
      c.config.base.cols = 48;
      ExpectRefused(c, "must be a multiple of 32 for RMSNORM_QUANT_Q8_0");
      c.config.base.cols = 64;
      EXPECT_EQ(c.Call(), RMSNORM_OK) << rmsnorm_last_error();
      c = ok;
      c.q = -1;
      ExpectRefused(c, "q is NULL");
      c = ok;
      c.q = ok.x * 4;  // exactly on x: q is never in place
      ExpectRefused(c, "overlap");
      c = ok;
      c.q = (ok.x + 64 * 4) * 4 - 1;  // q's first byte is x's last
      ExpectRefused(c, "overlap");
      c.x = ok.residual;
      c.q = (ok.residual + 64 * 4) * 4 - 1;  // residual's last (x for the plain call)
      ExpectRefused(c, "overlap");
      c = ok;
      c.scales = ok.q / 4 + 60;  // inside q's 256 bytes
      ExpectRefused(c, "overlap");
      c = ok;
      c.scales = ok.rstd + 2;
      ExpectRefused(c, "overlap");
      c = ok;
      c.q = ok.rstd * 4 + 1;
      ExpectRefused(c, "overlap");
      c = ok;
      c.format = RMSNORM_QUANT_Q8_0;
      c.scales = -1;
      c.q = ok.q + 1;  // a block's f16 scale misaligned
      ExpectRefused(c, "is not aligned");
      c = ok;
      c.config.y.outer = 63;  // q's rows would overlap
      ExpectRefused(c, "config->y (q's rows, in q's elements).outer");
      if (add) {
        c = ok;
        c.residual_out = ok.residual;  // residual_out may alias residual
        EXPECT_EQ(c.Call(), RMSNORM_OK) << rmsnorm_last_error();
      }
      // rows = 0: nothing is touched, not even the pointers; a bad format is still refused.
      c = ok;
      c.config.base.rows = 0;
      c.q = c.scales = -1;
      EXPECT_EQ(c.Call(), RMSNORM_OK) << rmsnorm_last_error();
      c.format = 9;
      ExpectRefused(c, "format is not an rmsnorm_quant_format");
    }
  }
  rmsnorm_set_backend(RMSNORM_BACKEND_AUTO);
}

}  // namespace
}  // namespace rmsnorm::test
