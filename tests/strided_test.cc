// Strided rows and the versioned config (the _ex calls): a strided call gives the bits of the plain
// call on the same rows packed, on every target and both backends, and touches nothing between rows;
// QK-norm runs in place inside a fused QKV buffer; the layout and overlap checks refuse exactly what
// the header says, writing nothing; struct_size versions the config.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"
#include "rmsnorm/rmsnorm.hpp"
#include "test_util.h"

namespace rmsnorm::test {
namespace {

using registry::Tensor;

constexpr uint8_t kGapByte = 0xA5;  // what the bytes between rows hold, and must still hold after a call

// One row tensor in a bigger buffer: row (o, i) at o * outer + i * inner elements from `offset`.
struct Strided {
  rmsnorm_dtype dtype = RMSNORM_F32;
  int64_t rows = 0, cols = 0, inner_rows = 1;
  rmsnorm_row_strides strides = {0, 0};
  int64_t offset = 0;  // elements from the buffer's start to row 0
  std::vector<uint8_t> buffer;

  size_t size() const { return registry::DtypeSize(dtype); }
  int64_t RowStart(int64_t r) const {
    return offset + (r / inner_rows) * strides.outer + (r % inner_rows) * strides.inner;
  }
  void* data() { return buffer.data() + offset * int64_t(size()); }
  // The rows, packed, as a RowTensor of the test utilities.
  RowTensor Gather() const {
    RowTensor t(dtype, rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(static_cast<uint8_t*>(t.data()) + r * cols * int64_t(size()), buffer.data() + RowStart(r) * int64_t(size()),
                  size_t(cols) * size());
    return t;
  }
  void Scatter(const RowTensor& t) {
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(buffer.data() + RowStart(r) * int64_t(size()),
                  static_cast<const uint8_t*>(t.data()) + r * cols * int64_t(size()), size_t(cols) * size());
  }
  // Every byte outside the rows still kGapByte: with the rows' bytes set to it as well, the buffer holds
  // nothing else. (Whole rows at a time: a per-byte mask took most of a sanitizer or qemu run's time.)
  bool GapsUntouched() const {
    std::vector<uint8_t> gaps = buffer;
    for (int64_t r = 0; r < rows; ++r)
      std::memset(gaps.data() + RowStart(r) * int64_t(size()), kGapByte, size_t(cols) * size());
    return gaps == std::vector<uint8_t>(gaps.size(), kGapByte);
  }
};

// A layout with gaps of its own: inner >= cols, outer beyond the last inner row, and a leading offset.
Strided MakeStrided(rmsnorm_dtype dtype, int64_t rows, int64_t cols, int64_t inner_rows, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> gap(0, 9);
  Strided s;
  s.dtype = dtype;
  s.rows = rows;
  s.cols = cols;
  s.inner_rows = inner_rows;
  s.strides.inner = inner_rows > 1 ? cols + gap(rng) : 0;
  s.strides.outer = (inner_rows - 1) * s.strides.inner + cols + gap(rng);
  s.offset = gap(rng);
  s.buffer.assign(size_t((s.offset + (rows / inner_rows) * s.strides.outer + 16) * int64_t(s.size())), kGapByte);
  return s;
}

rmsnorm_config_ex ConfigEx(const Case& c, int64_t inner_rows) {
  rmsnorm_config_ex config = rmsnorm_config_ex_init(c.rows, c.cols);
  config.base = c.Config();
  config.inner_rows = inner_rows;
  return config;
}

rmsnorm_row_strides& StridesOf(rmsnorm_config_ex& config, Tensor t) {
  switch (t) {
    case registry::kX: return config.x;
    case registry::kResidual: return config.residual;
    case registry::kY: return config.y;
    case registry::kResidualOut: return config.residual_out;
    case registry::kDy: return config.dy;
    default: return config.dx;
  }
}

struct Shape {
  int64_t rows, cols, inner_rows;
};

// Shapes: two levels with short rows (grouped), long rows, one level, one row per outer index, and
// rows long enough to split into chunks.
const Shape kShapes[] = {{12, 37, 3}, {8, 128, 4}, {6, 1000, 2}, {9, 16, 1}, {5, 64, 5}, {2, 70000, 2}};

// The strided forward and backward of every norm against the plain calls on the packed rows: equal
// bits for every output, statistics and parameter gradients included, and the gaps untouched.
void ExpectStridedEqualsPacked(const Case& c, int64_t inner_rows, bool in_place) {
  SCOPED_TRACE(c.Name() + " inner_rows=" + std::to_string(inner_rows) + (in_place ? " in place" : ""));
  std::mt19937 rng(c.seed);
  const Inputs in = MakeInputs(c);
  const Outputs want = RunForward(c, in);
  const registry::NormInfo& norm = registry::Info(c.op);

  // Forward.
  const registry::OpInfo& fwd = registry::Info(norm.forward);
  rmsnorm_config_ex config = ConfigEx(c, inner_rows);
  Strided x = MakeStrided(c.dtype, c.rows, c.cols, inner_rows, rng);
  Strided residual = MakeStrided(c.dtype, c.rows, c.cols, inner_rows, rng);
  Strided y = MakeStrided(c.dtype, c.rows, c.cols, inner_rows, rng);
  Strided residual_out = MakeStrided(c.dtype, c.rows, c.cols, inner_rows, rng);
  x.Scatter(in.x);
  residual.Scatter(in.residual);
  config.x = x.strides;
  config.residual = residual.strides;
  config.y = in_place ? x.strides : y.strides;
  config.residual_out = residual_out.strides;
  std::vector<float> mean(size_t(c.rows), -1.0f), rstd(size_t(c.rows), -1.0f);
  registry::TensorPointers t;
  t.Set(registry::kX, x.data());
  t.Set(registry::kResidual, residual.data());
  t.Set(registry::kWeight, in.weight.empty() ? nullptr : in.weight.data());
  t.Set(registry::kBias, in.bias.empty() ? nullptr : in.bias.data());
  t[registry::kY] = in_place ? x.data() : y.data();
  t[registry::kResidualOut] = residual_out.data();
  t[registry::kMean] = mean.data();
  t[registry::kRstd] = rstd.data();
  ASSERT_EQ(RMSNORM_OK, fwd.Call(&config, t)) << rmsnorm_last_error();
  const Strided& y_written = in_place ? x : y;
  EXPECT_TRUE(y_written.Gather().BitwiseEqual(want.y)) << fwd.c_function_ex << ": y";
  EXPECT_TRUE(y_written.GapsUntouched()) << fwd.c_function_ex << ": bytes between y's rows";
  EXPECT_EQ(0, std::memcmp(rstd.data(), want.rstd.data(), rstd.size() * sizeof(float))) << "rstd";
  if (fwd.Takes(registry::kMean))
    EXPECT_EQ(0, std::memcmp(mean.data(), want.mean.data(), mean.size() * sizeof(float))) << "mean";
  if (fwd.Takes(registry::kResidualOut)) {
    EXPECT_TRUE(residual_out.Gather().BitwiseEqual(want.residual_out)) << "residual_out";
    EXPECT_TRUE(residual_out.GapsUntouched()) << "bytes between residual_out's rows";
  }

  // Backward, from the saved statistics, at the forward's input (h for the fused add).
  const Outputs want_back = RunBackward(c, in, &want);
  const registry::OpInfo& bwd = registry::Info(norm.backward);
  Strided dy = MakeStrided(c.dtype, c.rows, c.cols, inner_rows, rng);
  Strided xb = MakeStrided(c.dtype, c.rows, c.cols, inner_rows, rng);
  Strided dx = MakeStrided(c.dtype, c.rows, c.cols, inner_rows, rng);
  dy.Scatter(in.dy);
  xb.Scatter(norm.fused_add() ? want.residual_out : in.x);
  config.x = xb.strides;
  config.dy = dy.strides;
  config.dx = in_place ? dy.strides : dx.strides;
  std::vector<float> dweight(size_t(c.cols), -1.0f), dbias(size_t(c.cols), -1.0f);
  registry::TensorPointers b;
  b.Set(registry::kDy, dy.data());
  b.Set(registry::kX, xb.data());
  b.Set(registry::kWeight, in.weight.empty() ? nullptr : in.weight.data());
  b.Set(registry::kMean, want.mean.empty() ? nullptr : want.mean.data());
  b.Set(registry::kRstd, want.rstd.data());
  b[registry::kDx] = in_place ? dy.data() : dx.data();
  b[registry::kDweight] = dweight.data();
  b[registry::kDbias] = dbias.data();
  ASSERT_EQ(RMSNORM_OK, bwd.Call(&config, b)) << rmsnorm_last_error();
  const Strided& dx_written = in_place ? dy : dx;
  EXPECT_TRUE(dx_written.Gather().BitwiseEqual(want_back.dx)) << bwd.c_function_ex << ": dx";
  EXPECT_TRUE(dx_written.GapsUntouched()) << "bytes between dx's rows";
  EXPECT_EQ(0, std::memcmp(dweight.data(), want_back.dweight.data(), dweight.size() * sizeof(float))) << "dweight";
  EXPECT_EQ(0, std::memcmp(dbias.data(), want_back.dbias.data(), dbias.size() * sizeof(float))) << "dbias";
}

Case CaseFor(registry::Norm norm, rmsnorm_dtype dtype, const Shape& shape) {
  Case c;
  c.op = norm;
  c.dtype = dtype;
  c.rows = shape.rows;
  c.cols = shape.cols;
  c.partial = registry::Info(norm).partial ? 0.25f : 1.0f;
  c.bias = true;
  c.seed = uint32_t(shape.rows * 131 + shape.cols);
  return c;
}

TEST(Strided, EqualsPackedOnEveryTargetAndBothBackends) {
  for (const rmsnorm_backend backend : {RMSNORM_BACKEND_AUTO, RMSNORM_BACKEND_REFERENCE}) {
    ASSERT_EQ(RMSNORM_OK, rmsnorm_set_backend(backend));
    for (const int64_t target : AvailableTargets()) {
      if (backend == RMSNORM_BACKEND_REFERENCE && target != AvailableTargets().front()) continue;
      ScopedTarget scoped(target);
      SCOPED_TRACE(TargetName(target) + (backend == RMSNORM_BACKEND_REFERENCE ? " reference" : ""));
      for (const registry::NormInfo& norm : registry::kNorms)
        for (const rmsnorm_dtype dtype : AllDtypes())
          for (const Shape& shape : kShapes) {
            if (shape.cols > 10000 && (dtype != RMSNORM_F32 || backend == RMSNORM_BACKEND_REFERENCE)) continue;
            ExpectStridedEqualsPacked(CaseFor(norm.norm, dtype, shape), shape.inner_rows, false);
          }
    }
  }
  rmsnorm_set_backend(RMSNORM_BACKEND_AUTO);
}

TEST(Strided, InPlaceWithTheSameLayout) {
  for (const registry::NormInfo& norm : registry::kNorms)
    for (const rmsnorm_dtype dtype : AllDtypes())
      ExpectStridedEqualsPacked(CaseFor(norm.norm, dtype, kShapes[0]), kShapes[0].inner_rows, true);
}

TEST(Strided, OneAndTwoThreadsAgree) {
  for (const int threads : {1, 2}) {
    ScopedThreads scoped(threads);
    SCOPED_TRACE(std::to_string(threads) + " threads");
    for (const Shape& shape : {Shape{4096, 128, 8}, Shape{64, 4096, 4}})
      ExpectStridedEqualsPacked(CaseFor(registry::Norm::kRmsNorm, RMSNORM_BF16, shape), shape.inner_rows, false);
  }
}

// Short strided rows of a call that moves more bytes than the last-level cache holds (up to 32 MiB:
// each tensor here has 32 MiB) are run group by group, each after a prefetch of the rows a group
// further down (RowPlan::group_prefetch_rows_ahead): the same bits as the packed call, forward and
// backward, for a kernel of each family.
TEST(Strided, ShortRowsBeyondTheCache) {
  const Shape shape{65536, 128, 32};
  for (const registry::Norm norm : {registry::Norm::kRmsNorm, registry::Norm::kLayerNorm})
    ExpectStridedEqualsPacked(CaseFor(norm, RMSNORM_F32, shape), shape.inner_rows, false);
}

// Per-head QK-norm in place inside qkv[tokens][(Hq + 2 * Hkv) * D], as Qwen3 and OLMo 2 do it: each
// head equals a plain call on that head alone, v is untouched, and the backward's dweight sums over
// tokens and heads.
TEST(Strided, QkNormInsideAFusedQkvBuffer) {
  constexpr int64_t kTokens = 7, kHq = 4, kHkv = 2, kD = 64, kWidth = (kHq + 2 * kHkv) * kD;
  std::mt19937 rng(3);
  std::normal_distribution<float> value(0.3f, 2.0f);
  std::vector<float> qkv(size_t(kTokens * kWidth)), q_weight(kD), k_weight(kD);
  for (float& v : qkv) v = value(rng);
  for (float& w : q_weight) w = 1.0f + 0.1f * value(rng);
  for (float& w : k_weight) w = 1.0f + 0.1f * value(rng);
  const std::vector<float> before = qkv;

  auto norm_heads = [&](int64_t first_head, int64_t heads, const std::vector<float>& weight) {
    rmsnorm_config_ex c = rmsnorm_config_ex_init(kTokens * heads, kD);
    c.inner_rows = heads;
    c.x.outer = c.y.outer = kWidth;
    c.x.inner = c.y.inner = kD;
    float* base = qkv.data() + first_head * kD;
    ASSERT_EQ(RMSNORM_OK, rmsnorm_forward_ex(&c, base, weight.data(), nullptr, base, nullptr)) << rmsnorm_last_error();
  };
  norm_heads(0, kHq, q_weight);
  norm_heads(kHq, kHkv, k_weight);

  const rmsnorm_config one_head = rmsnorm_config_init(1, kD);
  for (int64_t token = 0; token < kTokens; ++token) {
    for (int64_t head = 0; head < kHq + 2 * kHkv; ++head) {
      const float* was = before.data() + token * kWidth + head * kD;
      const float* got = qkv.data() + token * kWidth + head * kD;
      std::vector<float> want(was, was + kD);
      if (head < kHq + kHkv) {
        const std::vector<float>& w = head < kHq ? q_weight : k_weight;
        ASSERT_EQ(RMSNORM_OK, rmsnorm_forward(&one_head, was, w.data(), nullptr, want.data(), nullptr));
      }
      EXPECT_EQ(0, std::memcmp(got, want.data(), kD * sizeof(float))) << "token " << token << " head " << head;
    }
  }

  // Backward over q's heads: dy and dx strided like q, dweight against the packed backward.
  std::vector<float> dqkv(size_t(kTokens * kWidth));
  for (float& v : dqkv) v = value(rng);
  std::vector<float> q_packed, dq_packed;
  for (int64_t token = 0; token < kTokens; ++token)
    for (int64_t head = 0; head < kHq; ++head) {
      const int64_t at = token * kWidth + head * kD;
      q_packed.insert(q_packed.end(), before.begin() + at, before.begin() + at + kD);
      dq_packed.insert(dq_packed.end(), dqkv.begin() + at, dqkv.begin() + at + kD);
    }
  std::vector<float> dx_want(q_packed.size()), dweight_want(kD), dweight(kD);
  const rmsnorm_config packed = rmsnorm_config_init(kTokens * kHq, kD);
  ASSERT_EQ(RMSNORM_OK, rmsnorm_backward(&packed, dq_packed.data(), q_packed.data(), q_weight.data(), nullptr,
                                         dx_want.data(), dweight_want.data(), nullptr));
  rmsnorm_config_ex c = rmsnorm_config_ex_init(kTokens * kHq, kD);
  c.inner_rows = kHq;
  c.x.outer = c.dy.outer = c.dx.outer = kWidth;
  c.x.inner = c.dy.inner = c.dx.inner = kD;
  ASSERT_EQ(RMSNORM_OK, rmsnorm_backward_ex(&c, dqkv.data(), before.data(), q_weight.data(), nullptr, dqkv.data(),
                                            dweight.data(), nullptr))
      << rmsnorm_last_error();
  EXPECT_EQ(0, std::memcmp(dweight.data(), dweight_want.data(), kD * sizeof(float)));
  for (int64_t r = 0; r < kTokens * kHq; ++r) {
    const int64_t at = (r / kHq) * kWidth + (r % kHq) * kD;
    EXPECT_EQ(0, std::memcmp(dqkv.data() + at, dx_want.data() + r * kD, kD * sizeof(float))) << "row " << r;
  }
}

// ---- The checks -----------------------------------------------------------------------------------

// A refused call: the status, a message naming what is wrong, and not a byte written.
void ExpectRefused(rmsnorm_status want, const rmsnorm_config_ex& c, const void* x, void* y, size_t y_bytes,
                   const char* message_part) {
  std::vector<uint8_t> saved(static_cast<const uint8_t*>(y), static_cast<const uint8_t*>(y) + y_bytes);
  EXPECT_EQ(want, rmsnorm_forward_ex(&c, x, nullptr, nullptr, y, nullptr));
  EXPECT_NE(std::string(rmsnorm_last_error()).find(message_part), std::string::npos)
      << "message: " << rmsnorm_last_error() << "\nexpected to contain: " << message_part;
  if (y_bytes > 0) EXPECT_EQ(0, std::memcmp(saved.data(), y, y_bytes)) << "a refused call wrote to y";
}

TEST(Strided, LayoutChecks) {
  std::vector<float> x(4096, 1.0f), y(4096, 7.0f);
  const size_t y_bytes = y.size() * sizeof(float);
  auto config = [] {
    rmsnorm_config_ex c = rmsnorm_config_ex_init(8, 16);
    c.inner_rows = 4;
    c.x = c.y = {100, 20};
    return c;
  };
  rmsnorm_config_ex c = config();
  ASSERT_EQ(RMSNORM_OK, rmsnorm_forward_ex(&c, x.data(), nullptr, nullptr, y.data(), nullptr)) << rmsnorm_last_error();
  y.assign(y.size(), 7.0f);
  c.x.inner = 15;  // rows of 16 every 15 elements overlap
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, c, x.data(), y.data(), y_bytes, "config->x.inner (15) must be >= cols");
  c = config();
  c.y.outer = 75;  // the next outer row starts inside this one's last inner row: 3 * 20 + 16 = 76
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, c, x.data(), y.data(), y_bytes, "config->y.outer (75) must be >=");
  c = config();
  c.x.outer = -100;
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, c, x.data(), y.data(), y_bytes, "strides must be >= 0");
  c = config();
  c.inner_rows = 3;  // 8 rows are not whole outer rows of 3
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, c, x.data(), y.data(), y_bytes, "must divide");
  c = config();
  c.inner_rows = -1;
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, c, x.data(), y.data(), y_bytes, "inner_rows must be >= 0");
  c = config();
  c.x.outer = INT64_MAX / 2;
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, c, x.data(), y.data(), y_bytes, "reach too far");
  c = config();
  c.inner_rows = 1;
  c.x.outer = 15;  // one level: the row stride is below cols
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, c, x.data(), y.data(), y_bytes, "config->x.outer (15) must be >=");
}

TEST(Strided, OverlapChecksAreExact) {
  // Rows of x and y interleave in one buffer: row r of x at 32 r, of y at 32 r + 16. No element is
  // shared, so the call runs; shifted by one element, y's rows overlap x's and the call is refused.
  constexpr int64_t kRows = 6, kCols = 16;
  std::vector<float> buffer(kRows * 2 * kCols + 8);
  for (size_t i = 0; i < buffer.size(); ++i) buffer[i] = float(i % 7) - 3.0f;
  rmsnorm_config_ex c = rmsnorm_config_ex_init(kRows, kCols);
  c.x.outer = c.y.outer = 2 * kCols;
  std::vector<float> want(kRows * kCols), packed(kRows * kCols);
  for (int64_t r = 0; r < kRows; ++r)
    std::memcpy(packed.data() + r * kCols, buffer.data() + r * 2 * kCols, kCols * sizeof(float));
  const rmsnorm_config plain = rmsnorm_config_init(kRows, kCols);
  ASSERT_EQ(RMSNORM_OK, rmsnorm_forward(&plain, packed.data(), nullptr, nullptr, want.data(), nullptr));
  ASSERT_EQ(RMSNORM_OK, rmsnorm_forward_ex(&c, buffer.data(), nullptr, nullptr, buffer.data() + kCols, nullptr))
      << rmsnorm_last_error();
  for (int64_t r = 0; r < kRows; ++r)
    EXPECT_EQ(0, std::memcmp(buffer.data() + r * 2 * kCols + kCols, want.data() + r * kCols, kCols * sizeof(float)));

  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, c, buffer.data(), buffer.data() + kCols - 1,
                (buffer.size() - kCols + 1) * sizeof(float), "x and y overlap");
  // The same pointer with another layout is no in-place call.
  rmsnorm_config_ex other = c;
  other.y.outer = 2 * kCols + 1;
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, other, buffer.data(), buffer.data(), 0, "x and y overlap");
  // rstd inside a gap of x's rows is fine; inside a row it is refused.
  float* gap = buffer.data() + kCols;
  EXPECT_EQ(RMSNORM_OK, rmsnorm_forward_ex(&c, buffer.data(), nullptr, nullptr, buffer.data(), nullptr));
  rmsnorm_config_ex narrow = rmsnorm_config_ex_init(2, kCols);
  narrow.x.outer = narrow.y.outer = 2 * kCols;
  EXPECT_EQ(RMSNORM_OK, rmsnorm_forward_ex(&narrow, buffer.data(), nullptr, nullptr, buffer.data(), gap));
  EXPECT_EQ(RMSNORM_ERROR_INVALID_ARGUMENT, rmsnorm_forward_ex(&narrow, buffer.data(), nullptr, nullptr, buffer.data(),
                                                               gap - 1));
}

TEST(Strided, StructSizeVersionsTheConfig) {
  struct Newer {
    rmsnorm_config_ex known;
    int64_t unknown_field;
  };
  std::vector<float> x(64, 1.5f), y(64);
  Newer newer{rmsnorm_config_ex_init(4, 16), 0};
  newer.known.struct_size = sizeof(Newer);
  EXPECT_EQ(RMSNORM_OK, rmsnorm_forward_ex(&newer.known, x.data(), nullptr, nullptr, y.data(), nullptr))
      << "unknown fields left zero keep their defaults";
  newer.unknown_field = 1;
  ExpectRefused(RMSNORM_ERROR_UNSUPPORTED, newer.known, x.data(), y.data(), 0, "does not know");
  rmsnorm_config_ex older = rmsnorm_config_ex_init(4, 16);
  older.struct_size = sizeof(rmsnorm_config_ex) - 8;
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, older, x.data(), y.data(), 0, "rmsnorm_config_ex_init");
  EXPECT_EQ(RMSNORM_ERROR_INVALID_ARGUMENT, rmsnorm_forward_ex(nullptr, x.data(), nullptr, nullptr, y.data(), nullptr));
  // The plain config's checks still apply, under the _ex function's name.
  rmsnorm_config_ex bad = rmsnorm_config_ex_init(4, 0);
  ExpectRefused(RMSNORM_ERROR_INVALID_ARGUMENT, bad, x.data(), y.data(), 0, "rmsnorm_forward_ex: config->cols");
}

// The C++ API: strided matrices (head_matrix, a row stride) reach the _ex calls, packed ones the plain
// calls, and both give the bits of the packed rows.
TEST(Strided, CppApiHeadMatrices) {
  constexpr int64_t kTokens = 5, kHq = 4, kHkv = 2, kD = 16, kWidth = (kHq + 2 * kHkv) * kD;
  std::mt19937 rng(9);
  std::normal_distribution<float> value(0.0f, 1.5f);
  std::vector<float> qkv(size_t(kTokens * kWidth)), weight(kD), packed, want, rstd(kTokens * kHq);
  for (float& v : qkv) v = value(rng);
  for (float& w : weight) w = 1.0f + 0.2f * value(rng);
  for (int64_t t = 0; t < kTokens; ++t) packed.insert(packed.end(), qkv.begin() + t * kWidth, qkv.begin() + t * kWidth + kHq * kD);
  want.resize(packed.size());
  const auto args = rmsnorm::NormArgs{}.with_weight(weight);
  rmsnorm::rms_norm(rmsnorm::matrix(packed, kD), rmsnorm::matrix(want, kD), args);

  // In place, and into a packed output.
  std::vector<float> out(packed.size());
  const auto q = rmsnorm::head_matrix(qkv.data(), kTokens, kHq, kD, kWidth);
  rmsnorm::rms_norm(rmsnorm::Matrix<const float>(q), rmsnorm::matrix(out, kD), args, rmsnorm::Span<float>(rstd));
  EXPECT_EQ(0, std::memcmp(out.data(), want.data(), out.size() * sizeof(float)));
  rmsnorm::rms_norm(rmsnorm::Matrix<const float>(q), q, args);
  for (int64_t t = 0; t < kTokens; ++t)
    EXPECT_EQ(0, std::memcmp(qkv.data() + t * kWidth, want.data() + t * kHq * kD, kHq * kD * sizeof(float)));

  // One level: every other row of a (2 * rows, cols) array, through LayerNorm's backward too.
  std::vector<float> wide(size_t(2 * kTokens * kD)), dy(size_t(kTokens * kD)), dx(size_t(kTokens * kD));
  for (float& v : wide) v = value(rng);
  for (float& v : dy) v = value(rng);
  std::vector<float> rows_packed;
  for (int64_t r = 0; r < kTokens; ++r) rows_packed.insert(rows_packed.end(), wide.begin() + 2 * r * kD, wide.begin() + (2 * r + 1) * kD);
  std::vector<float> dx_want(dx.size()), dw(kD), dw_want(kD);
  rmsnorm::layer_norm_backward(rmsnorm::matrix(dy, kD), rmsnorm::matrix(rows_packed, kD), rmsnorm::matrix(dx_want, kD),
                               args, {}, {}, rmsnorm::ParamGrads{dw_want, {}});
  rmsnorm::layer_norm_backward(rmsnorm::matrix(dy, kD), rmsnorm::matrix<const float>(wide.data(), kTokens, kD, 2 * kD),
                               rmsnorm::matrix(dx, kD), args, {}, {}, rmsnorm::ParamGrads{dw, {}});
  EXPECT_EQ(0, std::memcmp(dx.data(), dx_want.data(), dx.size() * sizeof(float)));
  EXPECT_EQ(0, std::memcmp(dw.data(), dw_want.data(), dw.size() * sizeof(float)));

  // Two matrices split in two levels differently cannot share one call.
  std::vector<float> y(size_t(kTokens * kWidth));
  EXPECT_THROW(rmsnorm::rms_norm(rmsnorm::Matrix<const float>(rmsnorm::head_matrix(qkv.data(), kTokens, kHq, kD, kWidth)),
                                 rmsnorm::head_matrix(y.data(), kTokens * 2, kHq / 2, kD, kWidth / 2), args),
               rmsnorm::Error);
}

}  // namespace
}  // namespace rmsnorm::test
