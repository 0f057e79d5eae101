// Edges users rely on: any finite magnitude, zero, NaN and infinite rows, in-place calls, bitwise
// determinism across thread counts, very long rows, rows = 0, unaligned (but element-aligned) data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "test_util.h"

namespace rmsnorm::test {
namespace {

const Op kAllOps[] = {Op::kRmsNorm, Op::kL2Norm, Op::kLayerNorm, Op::kAddRmsNorm};

// Scales row `row` of x so that its largest magnitude is `largest`.
void ScaleRow(const Case& c, Inputs& in, int64_t row, double largest) {
  double max_abs = 0.0;
  for (int64_t i = 0; i < c.cols; ++i) max_abs = std::max(max_abs, std::fabs(in.x.get(row * c.cols + i)));
  for (int64_t i = 0; i < c.cols; ++i) in.x.set(row * c.cols + i, in.x.get(row * c.cols + i) / max_abs * largest);
}

// Forward and backward against the reference at tight tolerances.
void ExpectMatchesReference(const Case& c, const Inputs& in) {
  SCOPED_TRACE(c.Name());
  const Outputs ref = RunForward(c, in, RMSNORM_BACKEND_REFERENCE);
  const Outputs got = RunForward(c, in, RMSNORM_BACKEND_AUTO);
  const Tolerances ft = ForwardTolerances(c, in, ref);
  EXPECT_EQ("", Compare("y", Values(got.y), Values(ref.y), ft.y));
  EXPECT_EQ("", Compare("rstd", Values(got.rstd), Values(ref.rstd), ft.rstd));
  const Tolerances bt = BackwardTolerances(c, in, ref);
  const Outputs ref_grad = RunBackward(c, in, &ref, RMSNORM_BACKEND_REFERENCE);
  const Outputs got_grad = RunBackward(c, in, &ref, RMSNORM_BACKEND_AUTO);
  EXPECT_EQ("", Compare("dx", Values(got_grad.dx), Values(ref_grad.dx), bt.dx));
  EXPECT_EQ("", Compare("dweight", Values(got_grad.dweight), Values(ref_grad.dweight), bt.dweight));
}

// ---- Magnitudes ---------------------------------------------------------------------------------

// eps = 0 and rows scaled to the ends of f32's range: squares overflow (|x| ~ 3e38) or underflow
// (1e-30, and subnormal 1e-41), and the kernels' scaled fallback must still get the reference's answer.
TEST(Edge, AnyFiniteMagnitudeWithZeroEps) {
  for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16}) {  // f16's range never leaves f32's squares
    for (Op op : kAllOps) {
      for (double scale : {3e38, 1e19, 1e-19, 1e-30, 1e-41}) {
        Case c;
        c.op = op;
        c.dtype = dtype;
        c.rows = 3;
        c.cols = 37;
        c.eps = 0.0f;
        c.bias = true;
        Inputs in = MakeInputs(c);
        if (op == Op::kAddRmsNorm) in.residual = RowTensor(dtype, c.rows, c.cols);  // all zeros: h = x
        ScaleRow(c, in, 1, scale);  // rows 0 and 2 stay ordinary: each row takes its own path
        ExpectMatchesReference(c, in);
        const Outputs got = RunForward(c, in, RMSNORM_BACKEND_AUTO);
        for (int64_t i = 0; i < c.rows * c.cols; ++i) ASSERT_TRUE(std::isfinite(got.y.get(i))) << c.Name() << " scale " << scale;
      }
    }
  }
}

TEST(Edge, LongRowsAtExtremeMagnitudes) {
  for (Op op : kAllOps) {
    for (double scale : {3e37, 1e-30}) {
      Case c;
      c.op = op;
      c.rows = 2;
      c.cols = 40000;  // several reduction chunks
      c.eps = 0.0f;
      Inputs in = MakeInputs(c);
      if (op == Op::kAddRmsNorm) in.residual = RowTensor(c.dtype, c.rows, c.cols);
      ScaleRow(c, in, 0, scale);
      ExpectMatchesReference(c, in);
    }
  }
}

// Gradients at the ends of the range: tiny gradients on tiny rows (rstd near 2^40, where products
// with x rather than with xhat would underflow), and huge gradients on huge rows (whose products
// overflow f32 though the result does not).
TEST(Edge, ExtremeGradients) {
  for (Op op : kAllOps) {
    for (auto [row_scale, dy_scale] : {std::pair{1e-12, 1e-33}, std::pair{1e19, 1e20}, std::pair{1.0, 1e-38}}) {
      Case c;
      c.op = op;
      c.rows = 2;
      c.cols = 24;
      c.eps = 0.0f;
      Inputs in = MakeInputs(c);
      if (op == Op::kAddRmsNorm) in.residual = RowTensor(c.dtype, c.rows, c.cols);
      ScaleRow(c, in, 1, row_scale);
      for (int64_t i = c.cols; i < 2 * c.cols; ++i) in.dy.set(i, in.dy.get(i) * dy_scale);
      SCOPED_TRACE("row scale " + std::to_string(row_scale) + ", dy scale " + std::to_string(dy_scale));
      ExpectMatchesReference(c, in);
    }
  }
}

// pRMSNorm where c = sum(u xhat) / k overflows f32 while the row's other numbers do not.
TEST(Edge, PartialCorrectionBeyondF32) {
  Case c;
  c.rows = 1;
  c.cols = 4;
  c.eps = 0.0f;
  c.partial = 0.5f;
  c.weight = false;
  Inputs in = MakeInputs(c);
  const double x[4] = {std::ldexp(1.0, -44), 0.0, 1e30, 1e30};
  for (int i = 0; i < 4; ++i) {
    in.x.set(i, x[i]);
    in.dy.set(i, 1.0);
  }
  ExpectMatchesReference(c, in);
  const Outputs f = RunForward(c, in, RMSNORM_BACKEND_AUTO);
  const Outputs b = RunBackward(c, in, &f, RMSNORM_BACKEND_AUTO);
  EXPECT_FALSE(std::isnan(b.dx.get(1)));
}

// LayerNorm on rows whose mean f32 cannot hold, and with a small spread around a large mean.
TEST(Edge, LayerNormLargeMeanSmallSpread) {
  {
    Case c;
    c.op = Op::kLayerNorm;
    c.rows = 1;
    c.cols = 2;
    c.eps = 0.0f;
    c.weight = false;
    Inputs in = MakeInputs(c);
    in.x.set(0, 16777216.0);
    in.x.set(1, 16777218.0);  // mean 16777217: between two f32 values
    const Outputs f = RunForward(c, in, RMSNORM_BACKEND_AUTO);
    EXPECT_EQ(-1.0, f.y.get(0));
    EXPECT_EQ(1.0, f.y.get(1));
  }
  for (int64_t cols : {64, 40000}) {
    Case c;
    c.op = Op::kLayerNorm;
    c.rows = 2;
    c.cols = cols;
    c.bias = true;
    Inputs in = MakeInputs(c);
    for (int64_t i = 0; i < c.rows * c.cols; ++i) in.x.set(i, 1e4 + 0.01 * (in.x.get(i) - 0.7));
    ExpectMatchesReference(c, in);
  }
}

// Chunks of moderate values whose merged variance is beyond f32's squared range.
TEST(Edge, LayerNormVarianceBeyondF32) {
  Case c;
  c.op = Op::kLayerNorm;
  c.rows = 1;
  c.cols = 49153;
  c.eps = 0.0f;
  c.weight = false;
  Inputs in = MakeInputs(c);
  for (int64_t i = 0; i < c.cols - 1; ++i) in.x.set(i, -std::ldexp(1.0, 113));
  in.x.set(c.cols - 1, std::numeric_limits<float>::max());
  ExpectMatchesReference(c, in);
  const Outputs f = RunForward(c, in, RMSNORM_BACKEND_AUTO);
  for (int64_t i = 0; i < c.cols; ++i) ASSERT_TRUE(std::isfinite(f.y.get(i))) << i;
}

// ---- Zero, NaN and infinite rows ----------------------------------------------------------------

TEST(Edge, ZeroRowWithZeroEpsGivesZerosNotNaN) {
  for (Op op : kAllOps) {
    for (rmsnorm_dtype dtype : AllDtypes()) {
      Case c;
      c.op = op;
      c.dtype = dtype;
      c.rows = 3;
      c.cols = 20;
      c.eps = 0.0f;
      c.bias = true;
      Inputs in = MakeInputs(c);
      if (op == Op::kAddRmsNorm) in.residual = RowTensor(dtype, c.rows, c.cols);
      // Row 1: all zeros, or for LayerNorm all equal (zero variance).
      for (int64_t i = 0; i < c.cols; ++i) in.x.set(c.cols + i, op == Op::kLayerNorm ? 2.5 : 0.0);
      SCOPED_TRACE(c.Name());
      const Outputs f = RunForward(c, in, RMSNORM_BACKEND_AUTO);
      EXPECT_EQ(0.0f, f.rstd[1]);
      for (int64_t i = 0; i < c.cols; ++i) {
        // y = 0 * g + b: the bias, rounded to the dtype.
        const double expected_y = RowTensor(dtype, 1, 1).get(0) + [&] {
          RowTensor b(dtype, 1, 1);
          b.set(0, in.bias[size_t(i)]);
          return b.get(0);
        }();
        EXPECT_EQ(expected_y, f.y.get(c.cols + i));
      }
      const Outputs b = RunBackward(c, in, &f, RMSNORM_BACKEND_AUTO);
      for (int64_t i = 0; i < c.cols; ++i) EXPECT_EQ(0.0, b.dx.get(c.cols + i)) << i;
      for (float v : b.dweight) EXPECT_TRUE(std::isfinite(v));
      ExpectMatchesReference(c, in);
    }
  }
}

TEST(Edge, NaNAndInfinityStayInTheirRow) {
  for (Op op : kAllOps) {
    for (double poison : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
      Case c;
      c.op = op;
      c.rows = 3;
      c.cols = 50;
      Inputs in = MakeInputs(c);
      const Inputs clean = in;
      in.x.set(c.cols + 7, poison);
      SCOPED_TRACE(c.Name());
      const Outputs f = RunForward(c, in, RMSNORM_BACKEND_AUTO);
      const Outputs f_clean = RunForward(c, clean, RMSNORM_BACKEND_AUTO);
      const Outputs b = RunBackward(c, in, &f, RMSNORM_BACKEND_AUTO);
      const Outputs b_clean = RunBackward(c, clean, &f_clean, RMSNORM_BACKEND_AUTO);
      bool row_poisoned = false;
      for (int64_t i = 0; i < c.rows * c.cols; ++i) {
        const bool in_row_1 = i / c.cols == 1;
        if (in_row_1) {
          row_poisoned |= !std::isfinite(f.y.get(i));
          continue;
        }
        // Other rows: exactly what they are without the poison.
        EXPECT_EQ(f_clean.y.get(i), f.y.get(i)) << i;
        EXPECT_EQ(b_clean.dx.get(i), b.dx.get(i)) << i;
      }
      EXPECT_TRUE(row_poisoned);
      EXPECT_EQ(f_clean.rstd[0], f.rstd[0]);
      EXPECT_EQ(f_clean.rstd[2], f.rstd[2]);
    }
  }
}

// ---- In place -----------------------------------------------------------------------------------

TEST(Edge, InPlaceCallsMatchOutOfPlace) {
  for (rmsnorm_dtype dtype : AllDtypes()) {
    for (int64_t cols : {33, 40000}) {
      Case c;
      c.dtype = dtype;
      c.rows = 3;
      c.cols = cols;
      c.bias = true;
      c.partial = 0.5f;
      const Inputs in = MakeInputs(c);
      const rmsnorm_config config = c.Config();
      SCOPED_TRACE(c.Name());
      const float* w = in.weight.data();
      const float* bias = in.bias.data();

      const Outputs expected = RunForward(c, in, RMSNORM_BACKEND_AUTO);
      RowTensor y = in.x;  // y aliases x
      ASSERT_EQ(RMSNORM_OK, rmsnorm_forward(&config, y.data(), w, bias, y.data(), nullptr));
      EXPECT_TRUE(y.BitwiseEqual(expected.y));

      RowTensor l = in.x;
      Case lc = c;
      lc.op = Op::kLayerNorm;
      lc.partial = 1.0f;
      const rmsnorm_config lconfig = lc.Config();
      ASSERT_EQ(RMSNORM_OK, rmsnorm_layernorm_forward(&lconfig, l.data(), w, bias, l.data(), nullptr, nullptr));
      EXPECT_TRUE(l.BitwiseEqual(RunForward(lc, in, RMSNORM_BACKEND_AUTO).y));

      // Fused add: residual_out over residual, over x; y over x, over residual.
      Case ac = c;
      ac.op = Op::kAddRmsNorm;
      const Outputs add = RunForward(ac, in, RMSNORM_BACKEND_AUTO);
      {
        RowTensor residual = in.residual, out(dtype, c.rows, c.cols);
        ASSERT_EQ(RMSNORM_OK, rmsnorm_add_forward(&config, in.x.data(), residual.data(), w, bias, out.data(),
                                                  residual.data(), nullptr));
        EXPECT_TRUE(residual.BitwiseEqual(add.residual_out));
        EXPECT_TRUE(out.BitwiseEqual(add.y));
      }
      {
        RowTensor x = in.x, residual_out(dtype, c.rows, c.cols);
        ASSERT_EQ(RMSNORM_OK, rmsnorm_add_forward(&config, x.data(), in.residual.data(), w, bias, x.data(),
                                                  residual_out.data(), nullptr));
        EXPECT_TRUE(x.BitwiseEqual(add.y));
        EXPECT_TRUE(residual_out.BitwiseEqual(add.residual_out));
      }
      {
        RowTensor x = in.x, residual = in.residual;
        ASSERT_EQ(RMSNORM_OK, rmsnorm_add_forward(&config, x.data(), residual.data(), w, bias, residual.data(),
                                                  x.data(), nullptr));
        EXPECT_TRUE(residual.BitwiseEqual(add.y));
        EXPECT_TRUE(x.BitwiseEqual(add.residual_out));
      }

      // Backward: dx over dy.
      const Outputs grads = RunBackward(c, in, &expected, RMSNORM_BACKEND_AUTO);
      RowTensor dy = in.dy;
      std::vector<float> dweight(size_t(c.cols)), dbias(size_t(c.cols));
      ASSERT_EQ(RMSNORM_OK, rmsnorm_backward(&config, dy.data(), in.x.data(), w, expected.rstd.data(), dy.data(),
                                             dweight.data(), dbias.data()));
      EXPECT_TRUE(dy.BitwiseEqual(grads.dx));
      EXPECT_EQ(grads.dweight, dweight);
      EXPECT_EQ(grads.dbias, dbias);

      // dx over x.
      RowTensor x = in.x;
      ASSERT_EQ(RMSNORM_OK, rmsnorm_backward(&config, in.dy.data(), x.data(), w, expected.rstd.data(), x.data(),
                                             dweight.data(), dbias.data()));
      EXPECT_TRUE(x.BitwiseEqual(grads.dx));
      EXPECT_EQ(grads.dweight, dweight);
    }
  }
}

// The fused add is the add then the norm, bit for bit.
TEST(Edge, FusedAddEqualsAddThenNorm) {
  for (rmsnorm_dtype dtype : AllDtypes()) {
    Case c;
    c.op = Op::kAddRmsNorm;
    c.dtype = dtype;
    c.rows = 5;
    c.cols = 300;
    c.bias = true;
    const Inputs in = MakeInputs(c);
    const Outputs fused = RunForward(c, in, RMSNORM_BACKEND_AUTO);
    Case plain = c;
    plain.op = Op::kRmsNorm;
    Inputs h = in;
    h.x = fused.residual_out;
    for (int64_t i = 0; i < c.rows * c.cols; ++i) {
      RowTensor sum(dtype, 1, 1);
      sum.set(0, in.x.get(i) + in.residual.get(i));
      EXPECT_EQ(sum.get(0), fused.residual_out.get(i)) << i;
    }
    const Outputs unfused = RunForward(plain, h, RMSNORM_BACKEND_AUTO);
    EXPECT_TRUE(unfused.y.BitwiseEqual(fused.y)) << DtypeName(dtype);
    EXPECT_EQ(unfused.rstd, fused.rstd);
  }
}

// ---- Determinism --------------------------------------------------------------------------------

// Shapes that cut into many row blocks, into column chunks, and into the split path for few long rows.
TEST(Edge, BitwiseIdenticalForAnyThreadCount) {
  struct Shape {
    int64_t rows, cols;
  };
  for (const Shape shape : {Shape{1000, 300}, Shape{3, 70000}, Shape{9, 40000}, Shape{64, 1024}}) {
    for (Op op : kAllOps) {
      for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16}) {
        Case c;
        c.op = op;
        c.dtype = dtype;
        c.rows = shape.rows;
        c.cols = shape.cols;
        c.bias = true;
        const Inputs in = MakeInputs(c);
        SCOPED_TRACE(c.Name());
        Outputs first_forward, first_backward, first_recomputed;
        for (int threads : {1, 2, 3, 4, 7}) {
          ScopedThreads scoped(threads);
          const Outputs f = RunForward(c, in, RMSNORM_BACKEND_AUTO);
          const Outputs b = RunBackward(c, in, &f, RMSNORM_BACKEND_AUTO);
          const Outputs r = op == Op::kAddRmsNorm ? b : RunBackward(c, in, nullptr, RMSNORM_BACKEND_AUTO);
          if (threads == 1) {
            first_forward = f;
            first_backward = b;
            first_recomputed = r;
            continue;
          }
          EXPECT_TRUE(f.y.BitwiseEqual(first_forward.y)) << threads << " threads";
          EXPECT_EQ(f.rstd, first_forward.rstd) << threads << " threads";
          EXPECT_TRUE(b.dx.BitwiseEqual(first_backward.dx)) << threads << " threads";
          EXPECT_EQ(b.dweight, first_backward.dweight) << threads << " threads";
          EXPECT_EQ(b.dbias, first_backward.dbias) << threads << " threads";
          EXPECT_EQ(r.dweight, first_recomputed.dweight) << threads << " threads";
          EXPECT_TRUE(r.dx.BitwiseEqual(first_recomputed.dx)) << threads << " threads";
          EXPECT_EQ(f.mean, first_forward.mean) << threads << " threads";
        }
      }
    }
  }
}

TEST(Edge, ThreadCountSetting) {
  ScopedThreads scoped(3);
  EXPECT_EQ(3, rmsnorm_get_num_threads());
  rmsnorm_set_num_threads(0);
  EXPECT_GE(rmsnorm_get_num_threads(), 1);  // all hardware threads
}

// ---- Sizes --------------------------------------------------------------------------------------

TEST(Edge, VeryLongRows) {
  for (Op op : {Op::kRmsNorm, Op::kLayerNorm}) {
    Case c;
    c.op = op;
    c.rows = 1;
    c.cols = int64_t{1} << 21;
    c.bias = true;
    ExpectMatchesReference(c, MakeInputs(c));
  }
}

TEST(Edge, ZeroRowsIsANoOpWhateverThePointers) {
  rmsnorm_config config = rmsnorm_config_init(0, 16);
  EXPECT_EQ(RMSNORM_OK, rmsnorm_forward(&config, nullptr, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(RMSNORM_OK, rmsnorm_add_forward(&config, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(RMSNORM_OK, rmsnorm_backward(&config, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(RMSNORM_OK, rmsnorm_layernorm_forward(&config, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(RMSNORM_OK,
            rmsnorm_layernorm_backward(&config, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(RMSNORM_OK, rmsnorm_l2norm_forward(&config, nullptr, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(RMSNORM_OK, rmsnorm_l2norm_backward(&config, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr));
  // Outputs given are left alone: the sum over no rows is not written.
  std::vector<float> dweight(16, 42.0f);
  float dummy[16] = {};
  EXPECT_EQ(RMSNORM_OK, rmsnorm_backward(&config, dummy, dummy, nullptr, nullptr, dummy, dweight.data(), nullptr));
  EXPECT_EQ(std::vector<float>(16, 42.0f), dweight);
}

TEST(Edge, ElementAlignedButNotVectorAlignedData) {
  for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16}) {
    Case c;
    c.dtype = dtype;
    c.rows = 4;
    c.cols = 45;
    const Inputs in = MakeInputs(c);
    const Outputs expected = RunForward(c, in, RMSNORM_BACKEND_AUTO);
    const size_t size = registry::DtypeSize(dtype);
    const size_t bytes = size_t(c.rows * c.cols) * size;
    std::vector<uint8_t> x(bytes + 64), y(bytes + 64);
    const size_t offset = size;  // one element past a 64-byte boundary at most
    std::memcpy(x.data() + offset, in.x.data(), bytes);
    const rmsnorm_config config = c.Config();
    ASSERT_EQ(RMSNORM_OK, rmsnorm_forward(&config, x.data() + offset, in.weight.data(), nullptr, y.data() + offset, nullptr));
    EXPECT_EQ(0, std::memcmp(y.data() + offset, expected.y.data(), bytes));
  }
}

// ---- Small API surface --------------------------------------------------------------------------

TEST(Edge, PartialSize) {
  EXPECT_EQ(1, rmsnorm_partial_size(10, 0.1f));  // 0.1f * 10 is 1 + 1.5e-8: an integer within rounding
  EXPECT_EQ(256, rmsnorm_partial_size(4096, 0.0625f));
  EXPECT_EQ(2, rmsnorm_partial_size(3, 0.5f));
  EXPECT_EQ(1, rmsnorm_partial_size(1, 0.01f));
  EXPECT_EQ(1, rmsnorm_partial_size(5, 1e-6f));  // at least one element
  EXPECT_EQ(7, rmsnorm_partial_size(7, 1.0f));
  EXPECT_EQ(64, rmsnorm_partial_size(64, 0.99999f));
  EXPECT_EQ(-1, rmsnorm_partial_size(0, 0.5f));
  EXPECT_EQ(-1, rmsnorm_partial_size(8, 0.0f));
  EXPECT_NE(nullptr, std::strstr(rmsnorm_last_error(), "partial"));
}

TEST(Edge, BackendSelection) {
  EXPECT_EQ(RMSNORM_OK, rmsnorm_set_backend(RMSNORM_BACKEND_REFERENCE));
  EXPECT_EQ(RMSNORM_BACKEND_REFERENCE, rmsnorm_get_backend());
  EXPECT_EQ(RMSNORM_OK, rmsnorm_set_backend(RMSNORM_BACKEND_AUTO));
  // An out-of-range backend is refused: see c_api_test.c, since only C may pass one.
}

TEST(Edge, VersionMatchesHeader) {
  const std::string expected = std::to_string(RMSNORM_VERSION_MAJOR) + "." + std::to_string(RMSNORM_VERSION_MINOR) +
                               "." + std::to_string(RMSNORM_VERSION_PATCH);
  EXPECT_EQ(expected, rmsnorm_version());
  EXPECT_STRNE("", rmsnorm_cpu_target());
}

}  // namespace
}  // namespace rmsnorm::test
