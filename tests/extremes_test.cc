// Defined results at the extremes (include/rmsnorm/rmsnorm.h, "Extremes"): the kernels on every SIMD
// target give the reference's answer, NaN exactly where it has NaN, and the values the header states.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/statistics.h"
#include "test_util.h"

namespace rmsnorm::test {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

Case RowCase(Op op, int64_t rows, int64_t cols) {
  Case c;
  c.op = op;
  c.rows = rows;
  c.cols = cols;
  c.bias = false;
  return c;
}

Inputs ZeroInputs(const Case& c) {
  Inputs in;
  in.x = RowTensor(c.dtype, c.rows, c.cols);
  in.residual = RowTensor(c.dtype, c.rows, c.cols);
  in.dy = RowTensor(c.dtype, c.rows, c.cols);
  for (int64_t i = 0; i < c.rows * c.cols; ++i) in.dy.set(i, 1.0 - 0.25 * double(i % 7));
  if (c.weight) in.weight.assign(size_t(c.cols), 1.0f);
  if (c.bias) in.bias.assign(size_t(c.cols), 0.0f);
  return in;
}

// The backward from the given saved statistics on every target against an oracle's dx and dweight,
// within the tolerances bt.
void ExpectBackwardOnEveryTargetWithin(const Case& c, const Inputs& in, const Outputs& saved, const Outputs& oracle,
                                       const Tolerances& bt) {
  for (int64_t target : AvailableTargets()) {
    SCOPED_TRACE(TargetName(target));
    const ScopedTarget scoped(target);
    const Outputs got = RunBackward(c, in, &saved, RMSNORM_BACKEND_AUTO);
    EXPECT_EQ("", Compare("dweight", Values(got.dweight), Values(oracle.dweight), bt.dweight));
    EXPECT_EQ("", Compare("dx", Values(got.dx), Values(oracle.dx), bt.dx));
  }
}

// The backward from the given saved statistics on every target against the reference's; returns the
// reference's.
Outputs ExpectBackwardOnEveryTargetMatches(const Case& c, const Inputs& in, const Outputs& saved) {
  const Outputs ref = RunBackward(c, in, &saved, RMSNORM_BACKEND_REFERENCE);
  ExpectBackwardOnEveryTargetWithin(c, in, saved, ref, BackwardTolerances(c, in, saved));
  return ref;
}

// The forward, and the backward from the reference's saved statistics, on every target against the
// reference; returns the reference's forward.
Outputs ExpectEveryTargetMatches(const Case& c, const Inputs& in) {
  SCOPED_TRACE(c.Name());
  const Outputs ref = RunForward(c, in, RMSNORM_BACKEND_REFERENCE);
  const Tolerances ft = ForwardTolerances(c, in, ref);
  for (int64_t target : AvailableTargets()) {
    SCOPED_TRACE(TargetName(target));
    const ScopedTarget scoped(target);
    const Outputs got = RunForward(c, in, RMSNORM_BACKEND_AUTO);
    EXPECT_EQ("", Compare("y", Values(got.y), Values(ref.y), ft.y));
    EXPECT_EQ("", Compare("rstd", Values(got.rstd), Values(ref.rstd), ft.rstd));
  }
  ExpectBackwardOnEveryTargetMatches(c, in, ref);
  return ref;
}

// ---- Gains and outputs beyond f32 ---------------------------------------------------------------

// The gain is weight_offset + weight[i] summed in f32: beyond f32's range it is infinite, and the
// output follows IEEE arithmetic from there (0 * inf is NaN).
TEST(Extremes, OverflowingGainIsInfinite) {
  Case layer = RowCase(Op::kLayerNorm, 1, 5);  // a constant row: x - mean = 0 everywhere
  layer.weight_offset = -1.7e38f;
  Inputs in = ZeroInputs(layer);
  for (int64_t i = 0; i < layer.cols; ++i) in.x.set(i, -2.05e38), in.weight[size_t(i)] = -2.05e38f;
  const Outputs ref = ExpectEveryTargetMatches(layer, in);
  for (int64_t i = 0; i < layer.cols; ++i) EXPECT_TRUE(std::isnan(ref.y.get(i))) << i;

  Case rms = RowCase(Op::kRmsNorm, 1, 4);
  rms.weight_offset = 3e38f;
  Inputs rin = ZeroInputs(rms);
  for (int64_t i = 0; i < rms.cols; ++i) rin.x.set(i, double(i + 1));
  rin.weight = {3e38f, 1.0f, 1.0f, 1.0f};  // 6e38 is beyond f32: an infinite gain in column 0
  const Outputs rref = ExpectEveryTargetMatches(rms, rin);
  EXPECT_EQ(rref.y.get(0), kInf);
}

// y = x * rstd * g + b beyond f32's range is infinite; biases and gains of any finite size are fine.
TEST(Extremes, OverflowingOutputsAreInfinite) {
  Case c = RowCase(Op::kRmsNorm, 2, 19);
  c.bias = true;
  Inputs in = ZeroInputs(c);
  for (int64_t i = 0; i < c.rows * c.cols; ++i) in.x.set(i, double(i % 5) - 2.0);
  // Row 0: x = -2, -1, 0, 1, 2, ... so rstd = 1 / sqrt(36 / 19) = 0.73.
  for (int64_t i = 0; i < c.cols; ++i) {
    in.weight[size_t(i)] = i % 2 ? 3e38f : 1.5e38f;
    in.bias[size_t(i)] = i % 2 ? 0.0f : 3e38f;
  }
  const Outputs ref = ExpectEveryTargetMatches(c, in);
  EXPECT_EQ(ref.y.get(5), -kInf);  // -2 * 0.73 * 3e38
  EXPECT_EQ(ref.y.get(9), kInf);   // 2 * 0.73 * 3e38
  EXPECT_EQ(ref.y.get(4), kInf);   // 2 * 0.73 * 1.5e38 + 3e38
  EXPECT_TRUE(std::isfinite(ref.y.get(0)));  // -2 * 0.73 * 1.5e38 + 3e38
}

// Where x-hat * g passes f32's range and a bias of the other sign brings y back, the chunk is computed
// in double: y is the reference's finite value, not the f32 product's inf. Row 0 overflows in column 7,
// row 1 does not. RMSNorm and LayerNorm: x-hat is about -1.6 there and the gain 3e38, so every chunk is
// looked at. pRMSNorm (k = 2): column 7 is past k, x-hat -10 and the gain 4e37, too small to overflow
// below k, so only the columns past k are. RMSNorm's row 1 keeps the f32 epilogue's bits, (x * rstd)
// * g + b rounded at each step, on every target: only the row that overflows takes the double path.
// (L2-Norm cannot overflow there: its |x-hat| is at most 1.)
TEST(Extremes, BiasBringsAnOverflowingProductBack) {
  struct Variant {
    Op op;
    float partial;
    float gain;
    bool nan_gain;  // a NaN gain in column 3 too: the largest finite gain still counts
  };
  for (const Variant v : {Variant{Op::kRmsNorm, 1.0f, 3e38f, false}, Variant{Op::kLayerNorm, 1.0f, 3e38f, false},
                          Variant{Op::kRmsNorm, 0.1f, 4e37f, false}, Variant{Op::kRmsNorm, 1.0f, 3e38f, true}}) {
    Case c = RowCase(v.op, 2, 19);
    c.partial = v.partial;
    c.bias = true;
    SCOPED_TRACE(c.Name());
    Inputs in = ZeroInputs(c);
    const bool past_k = v.partial < 1.0f;
    for (int64_t i = 0; i < c.cols; ++i) {
      // Both rows alternate +-1, with a 0 at the end; column 7 is large in row 0 and small in row 1.
      const double sign = i % 2 ? -1.0 : 1.0;
      const double large = past_k ? 10.0 : 1.6;
      in.x.set(i, i == 7 ? -large : i == 18 ? 0.0 : sign);
      in.x.set(c.cols + i, i == 7 ? -0.1 : i == 18 ? 0.0 : sign);
      in.weight[size_t(i)] = i == 7 ? v.gain : 1.0f;
      in.bias[size_t(i)] = i == 7 ? 3e38f : 0.25f;
    }
    if (v.nan_gain) in.weight[3] = std::numeric_limits<float>::quiet_NaN();
    const Outputs ref = ExpectEveryTargetMatches(c, in);
    const double xhat = (in.x.get(7) - (ref.mean.empty() ? 0.0 : ref.mean[0])) * ref.rstd[0];
    ASSERT_GT(std::fabs(xhat * v.gain), double(std::numeric_limits<float>::max())) << "the product must overflow f32";
    EXPECT_TRUE(std::isfinite(ref.y.get(7))) << ref.y.get(7);
    if (v.op != Op::kRmsNorm || past_k || v.nan_gain) continue;
    for (int64_t target : AvailableTargets()) {
      SCOPED_TRACE(TargetName(target));
      const ScopedTarget scoped(target);
      const Outputs got = RunForward(c, in, RMSNORM_BACKEND_AUTO);
      for (int64_t i = 0; i < c.cols; ++i) {
        const float f32 = float(in.x.get(c.cols + i)) * got.rstd[1] * in.weight[size_t(i)] + in.bias[size_t(i)];
        EXPECT_EQ(got.y.get(c.cols + i), f32) << i;
      }
    }
  }
}

// pRMSNorm's columns past k are outside the statistic: there x * rstd can pass f32's range while the
// gain brings y back (issue 18's first class; tests/fuzz/regressions/
// add_forward_x_rstd_overflows_before_a_zero_gain). Such chunks take the double path: y is the
// reference's, 0 where the gain is 0 rather than inf * 0. Rows of 26 run in groups, which look at the
// columns past k before writing y; rows of 600 one at a time, which look while writing y and write the
// chunk again in double.
TEST(Extremes, PartialRmsNormBeyondF32PastK) {
  for (Op op : {Op::kRmsNorm, Op::kAddRmsNorm}) {
    for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16}) {
      for (int64_t cols : {int64_t{26}, int64_t{600}}) {
        Case c = RowCase(op, 5, cols);
        c.dtype = dtype;
        c.partial = 7.9e-24f;  // k = 1
        c.eps = 7.9e-24f;
        c.bias = true;
        SCOPED_TRACE(c.Name());
        Inputs in = ZeroInputs(c);
        for (int64_t r = 0; r < c.rows; ++r) {
          // Row 0: rstd is about 3.6e11 from x_0 = -3.2e-20 and eps, and x_i = -1.03e35 past k makes
          // x * rstd 3.7e46. The other rows are ordinary. (One such row: two of them would sum their
          // dweight terms beyond f32, which the backward does in f32.)
          const bool extreme = r == 0;
          for (int64_t i = 0; i < c.cols; ++i)
            in.x.set(r * c.cols + i,
                     !extreme ? 0.25 * double(i % 5) + 0.5 : i == 0 ? -3.2e-20 : i % 3 ? 1.0 : -1.03e35);
        }
        for (int64_t i = 0; i < c.cols; ++i)
          in.weight[size_t(i)] = i % 4 == 0 ? 0.0f : 1e-12f, in.bias[size_t(i)] = 0.5f;
        const Outputs ref = ExpectEveryTargetMatches(c, in);
        EXPECT_NEAR(ref.y.get(3), -1.03e35 / std::sqrt(7.9e-24 + 3.2e-20 * 3.2e-20) * 1e-12 + 0.5, 4e32);
        EXPECT_EQ(ref.y.get(12), 0.5);  // -1.03e35 * rstd * 0 + 0.5
      }
    }
  }
}

// The backward's x-hat * c can pass f32's range where the sum c is taken over one column (k = 1) and
// the saved rstd is twice the forward's, as the contract allows: x-hat = 2, u = 1e38, c = 2e38 and
// x-hat * c = 4e38, though dx = rstd * (u - x-hat * c) is -6e13. Such a row is computed in double
// (tests/fuzz/regressions/prms_backward_xhat_times_c_overflows_with_rstd_twice_the_forwards). Row 1 is
// ordinary. (With more columns in the sum, its f32 partial sums overflow first, which already sends
// the row to double.)
TEST(Extremes, BackwardCoefficientNearF32MaxIsComputedInDouble) {
  for (float partial : {1.0f, 0.125f}) {
    Case c = RowCase(Op::kRmsNorm, 2, partial < 1.0f ? 8 : 1);
    c.partial = partial;  // k = 1 either way
    SCOPED_TRACE(c.Name());
    Inputs in = ZeroInputs(c);
    for (int64_t i = 0; i < c.cols; ++i) {
      in.x.set(i, 1e25 * (1.0 + 0.25 * double(i)));
      in.dy.set(i, i == 0 ? 1e38 : 0.5);
      in.x.set(c.cols + i, 1.0 + 0.5 * double(i));
      in.dy.set(c.cols + i, -0.25);
    }
    Outputs saved = RunForward(c, in, RMSNORM_BACKEND_REFERENCE);
    for (float& rstd : saved.rstd) rstd *= 2.0f;
    const Outputs ref = ExpectBackwardOnEveryTargetMatches(c, in, saved);
    EXPECT_TRUE(std::isfinite(ref.dx.get(0))) << ref.dx.get(0);
  }
}

// Gradients near f32's top: u = dy * g is finite, and so are the row's sums, but u - mean(u)
// (LayerNorm) or u - x-hat * c (RMSNorm) passes f32's range before rstd = 0.1 brings dx back. Row 0:
// x = +-10, so x-hat = +-1, and u_0 = -+3.3e38 with the other columns such that the intermediate of
// dx_0 is 3.4e38 or more: RMSNorm's c = -1.4e37, LayerNorm's mean(u) = 3e37 (and mean(u x-hat) = 0).
// The f32 path gives +-inf there; a row with |u| at 2^126 or more is computed in double. Row 1 is
// ordinary.
TEST(Extremes, BackwardGradientNearF32MaxIsComputedInDouble) {
  for (Op op : {Op::kRmsNorm, Op::kLayerNorm}) {
    for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16}) {
      Case c = RowCase(op, 2, 8);
      c.dtype = dtype;
      SCOPED_TRACE(c.Name());
      Inputs in = ZeroInputs(c);
      const bool layer = op == Op::kLayerNorm;
      for (int64_t i = 0; i < c.cols; ++i) {
        const double xhat = i % 2 ? -1.0 : 1.0;
        in.x.set(i, 10.0 * xhat);
        in.dy.set(i, layer ? (i == 0 ? -3.3e38 : i % 2 ? 3e37 : 1.5e38) : (i == 0 ? 3.3e38 : -6.3e37 * xhat));
        in.x.set(c.cols + i, 1.0 + 0.5 * double(i));
      }
      double sum_u = 0.0, sum_u_xhat = 0.0;
      for (int64_t i = 0; i < c.cols; ++i) sum_u += in.dy.get(i), sum_u_xhat += in.dy.get(i) * (i % 2 ? -1.0 : 1.0);
      const double want = 0.1 * (in.dy.get(0) - (layer ? sum_u / 8.0 : 0.0) - sum_u_xhat / 8.0);
      ASSERT_GE(std::fabs(want), 0.1 * 3.4e38);  // the f32 intermediate overflows
      const Outputs saved = RunForward(c, in, RMSNORM_BACKEND_REFERENCE);
      const Outputs ref = ExpectBackwardOnEveryTargetMatches(c, in, saved);
      const double tolerance = dtype == RMSNORM_BF16 ? 0x1p-8 : 1e-6;  // dx's rounding to its dtype
      EXPECT_NEAR(ref.dx.get(0), want, tolerance * std::fabs(want));
    }
  }
}

// ---- Intermediates below f32's normal range --------------------------------------------------------

// x * rstd is rounded to f32 before the gain: below 2^-126 that rounding is absolute, and y may be off
// by up to 2^-149 * |g| (tests/fuzz/regressions/forward_x_rstd_underflows_before_the_gain). Here
// x * rstd is 1e-48, which f32 holds as 0, and the gain 1e20 would make y 1e-28.
TEST(Extremes, ForwardUnderflowBeforeTheGainIsAbsolute) {
  for (Op op : {Op::kRmsNorm, Op::kL2Norm}) {
    Case c = RowCase(op, 2, 16);
    c.eps = 0.0f;
    Inputs in = ZeroInputs(c);
    for (int64_t i = 0; i < c.rows * c.cols; ++i) in.x.set(i, i % 16 == 15 ? 1e-30 : 1e18);
    in.weight[15] = 1e20f;
    const Outputs ref = ExpectEveryTargetMatches(c, in);
    EXPECT_GT(std::fabs(ref.y.get(15)), 1e-32);  // the reference keeps it
    EXPECT_LT(std::fabs(ref.y.get(15)), 0x1p-149 * 1e20);
  }
}

// LayerNorm over a row of subnormal values: the f32 path centers on its mean split into f32 hi + lo,
// and below f32's normal range that split drops the mean's low bits, which rstd (1000 from eps) then
// scales into every y (tests/fuzz/regressions/layernorm_forward_subnormal_outputs). Such rows take
// the double path, forward and backward.
TEST(Extremes, LayerNormSubnormalMeanIsExact) {
  Case c = RowCase(Op::kLayerNorm, 3, 59);
  c.eps = 1e-6f;
  c.weight_offset = 1.0f;
  c.bias = true;
  Inputs in = ZeroInputs(c);
  for (int64_t i = 0; i < c.rows * c.cols; ++i)
    in.x.set(i, i < 2 * c.cols ? std::ldexp(double(i % 7) * 4999.0 - 9001.0, -149) : 0.5 * double(i % 4));
  for (int64_t i = 0; i < c.cols; ++i) in.weight[size_t(i)] = 0.0f, in.bias[size_t(i)] = 0.0f;
  const Outputs ref = ExpectEveryTargetMatches(c, in);
  EXPECT_TRUE(std::isnormal(ref.y.get(1)));
}

// The backward's u = dy * g is rounded to f32 before rstd scales it: a subnormal dy (1e-44) and rstd
// 2^40 leave dx off by up to 2^-149 * rstd per such term (tests/fuzz/regressions/
// backward_dx_underflows_to_zero).
TEST(Extremes, BackwardSubnormalProductsAreAbsolute) {
  for (Op op : {Op::kRmsNorm, Op::kLayerNorm}) {
    Case c = RowCase(op, 2, 16);
    c.eps = 0.0f;
    Inputs in = ZeroInputs(c);
    for (int64_t i = 0; i < c.rows * c.cols; ++i) {
      in.x.set(i, std::ldexp(i % 2 ? 1.0 : -1.0, -40));
      in.dy.set(i, 1e-44 * double(i % 5 + 1));
    }
    for (int64_t i = 0; i < c.cols; ++i) in.weight[size_t(i)] = 0.3f;
    ExpectEveryTargetMatches(c, in);
  }
}

// LayerNorm's dweight adds dy * x-hat per row: with saved statistics where x-hat is subnormal (1e-43)
// and dy is 1e30, each term is off by up to 2^-149 * |dy| (tests/fuzz/regressions/
// layernorm_backward_dweight_tiny_values).
TEST(Extremes, DweightOfSubnormalXhatIsAbsolute) {
  Case c = RowCase(Op::kLayerNorm, 6, 1);
  Inputs in = ZeroInputs(c);
  for (int64_t r = 0; r < c.rows; ++r) in.x.set(r, 1e-40 * double(r + 1)), in.dy.set(r, 1e30);
  Outputs saved;
  saved.mean.assign(size_t(c.rows), 0.0f);
  saved.rstd.assign(size_t(c.rows), 1e-3f);
  ExpectBackwardOnEveryTargetMatches(c, in, saved);
}

// ---- Parameter gradients whose f32 sums leave f32's range ---------------------------------------

// dweight and dbias add each row's term in f32 within a block of rows: dy near f32's maximum with
// opposite signs in consecutive rows (and |x-hat| about 4) makes the f32 sum +-inf or inf - inf = NaN,
// where the double sum over rows is finite, often exactly 0. Such columns are summed again in double
// (header, "Extremes"): on every target they are the reference's (bit for bit: the same terms in the
// same order), where the f32 sums gave +-inf or NaN. Saved statistics are the forward's; 2 rows (one block), 3, and 40 rows (several
// blocks, summed in double after f32 within each); and the recomputing backward.
TEST(Extremes, ParamGradSumsBeyondF32AreSummedInDouble) {
  const double kBig = 3e38;  // below f32's maximum, 3.4e38; twice it is beyond
  for (Op op : {Op::kRmsNorm, Op::kLayerNorm, Op::kL2Norm}) {
    for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16}) {  // f16 has no values this large
      for (int64_t rows : {2, 3, 40}) {
        for (bool saved : {true, false}) {
          Case c = RowCase(op, rows, 19);
          c.dtype = dtype;
          if (op == Op::kRmsNorm && rows == 3) c.partial = 0.25f;
          Inputs in = ZeroInputs(c);
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < c.cols; ++i) {
              in.x.set(r * c.cols + i, i == 0 ? 10.0 + double(r % 3) : 0.1 * double(i % 4) - 0.15);
              // Column 0: +-kBig times x-hat about 4 (dweight's term beyond f32). Columns 1 and 2:
              // +kBig, +kBig, -kBig, -kBig, ... (f32 partial sums beyond f32 in dbias and dweight).
              const double sign = (r / 2) % 2 == 0 ? 1.0 : -1.0;
              const double dy = i == 0 ? (r % 2 ? -kBig : kBig) : i < 3 ? sign * kBig : 0.5 - 0.125 * double(i % 5);
              in.dy.set(r * c.cols + i, dy);
            }
          }
          SCOPED_TRACE(c.Name() + (saved ? " saved statistics" : " recomputed"));
          const Outputs forward = RunForward(c, in, RMSNORM_BACKEND_REFERENCE);
          const Outputs* stats = saved ? &forward : nullptr;
          const Outputs ref = RunBackward(c, in, stats, RMSNORM_BACKEND_REFERENCE);
          const Tolerances bt = BackwardTolerances(c, in, forward);
          // The case is what it says: finite sums that f32 partial sums cannot reach (with 2 rows,
          // columns 1 and 2 sum to 6e38, and with 3 rows column 0 to about 1e39: beyond f32 in the
          // reference too, +-inf).
          if (rows != 3) EXPECT_TRUE(std::isfinite(ref.dweight[0]));
          for (int64_t i = 1; rows == 40 && i < 3; ++i) {
            EXPECT_TRUE(std::isfinite(ref.dweight[size_t(i)])) << i;
            EXPECT_TRUE(std::isfinite(ref.dbias[size_t(i)])) << i;
          }
          for (int64_t target : AvailableTargets()) {
            SCOPED_TRACE(TargetName(target));
            const ScopedTarget scoped(target);
            const Outputs got = RunBackward(c, in, stats, RMSNORM_BACKEND_AUTO);
            EXPECT_EQ("", Compare("dweight", Values(got.dweight), Values(ref.dweight), bt.dweight));
            EXPECT_EQ("", Compare("dbias", Values(got.dbias), Values(ref.dbias), bt.dbias));
            EXPECT_EQ("", Compare("dx", Values(got.dx), Values(ref.dx), bt.dx));
            // Columns 1 and 2 of dbias sum +-kBig: every block's f32 sum passes f32's range, so they
            // are the double sums, the reference's bits.
            EXPECT_EQ(got.dbias[1], ref.dbias[1]);
            EXPECT_EQ(got.dbias[2], ref.dbias[2]);
          }
        }
      }
    }
  }
}

// ---- Infinities in x, weight and bias -----------------------------------------------------------

// An infinite element makes the row's statistic infinite: rstd = 0 for the RMSNorm family (y = b,
// NaN at the infinite elements, as inf * 0), NaN for LayerNorm (its mean is infinite). An infinite
// gain or bias makes its column infinite (NaN where it meets x - mean = 0). Other rows are untouched.
TEST(Extremes, InfinitiesInXWeightAndBias) {
  for (Op op : {Op::kRmsNorm, Op::kL2Norm, Op::kLayerNorm, Op::kAddRmsNorm}) {
    for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16, RMSNORM_F16}) {
      Case c = RowCase(op, 3, 21);
      c.dtype = dtype;
      c.bias = true;
      Inputs in = ZeroInputs(c);
      for (int64_t i = 0; i < c.rows * c.cols; ++i) in.x.set(i, 0.5 * double(i % 9) - 2.0);
      in.x.set(1 * c.cols + 3, kInf);    // row 1: an infinite element
      in.weight[5] = std::numeric_limits<float>::infinity();
      in.bias[7] = -std::numeric_limits<float>::infinity();
      const Outputs ref = ExpectEveryTargetMatches(c, in);
      if (op == Op::kRmsNorm || op == Op::kL2Norm) {
        EXPECT_EQ(ref.rstd[1], 0.0f);
        EXPECT_TRUE(std::isnan(ref.y.get(1 * c.cols + 3)));
        EXPECT_EQ(ref.y.get(1 * c.cols + 0), 0.0);  // b = 0 there
      }
      if (op == Op::kLayerNorm) {
        EXPECT_TRUE(std::isnan(ref.y.get(1 * c.cols + 0)));
      }
      EXPECT_EQ(ref.y.get(7), -kInf);  // row 0, the infinite bias
    }
  }
}

// ---- Subnormal statistics and zero rows ---------------------------------------------------------

// With eps = 0, a row of subnormal values has a statistic whose rstd exceeds f32 (above 2^128): the
// reported rstd is +inf, while y and dx are computed from the exact rstd in double.
TEST(Extremes, SubnormalStatistics) {
  for (Op op : {Op::kRmsNorm, Op::kLayerNorm, Op::kL2Norm}) {
    for (rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16}) {  // f16 has no values this small
      Case c = RowCase(op, 2, 33);
      c.dtype = dtype;
      c.eps = 0.0f;
      Inputs in = ZeroInputs(c);
      // Multiples of 2^-133, bf16's smallest subnormal (f32 has smaller): a statistic near 2^-260.
      for (int64_t i = 0; i < c.rows * c.cols; ++i) in.x.set(i, std::ldexp(double(i % 11) - 5.0, -133));
      const Outputs ref = ExpectEveryTargetMatches(c, in);
      EXPECT_EQ(ref.rstd[0], std::numeric_limits<float>::infinity());
      for (int64_t i = 0; i < c.cols; ++i) EXPECT_TRUE(std::isfinite(ref.y.get(i))) << i;
    }
  }
}

// eps = 0 and a row with nothing to normalize (all zeros; for LayerNorm all equal): y = b, rstd = 0.
TEST(Extremes, ZeroRowsWithZeroEps) {
  for (Op op : {Op::kRmsNorm, Op::kLayerNorm, Op::kL2Norm, Op::kAddRmsNorm}) {
    Case c = RowCase(op, 2, 40);
    c.eps = 0.0f;
    c.bias = true;
    Inputs in = ZeroInputs(c);
    for (int64_t i = 0; i < c.cols; ++i) {
      in.x.set(i, op == Op::kLayerNorm ? 7.0 : 0.0);
      in.x.set(c.cols + i, double(i % 3));
      in.bias[size_t(i)] = float(i) * 0.5f;
    }
    const Outputs ref = ExpectEveryTargetMatches(c, in);
    EXPECT_EQ(ref.rstd[0], 0.0f);
    for (int64_t i = 0; i < c.cols; ++i) EXPECT_EQ(ref.y.get(i), double(i) * 0.5) << i;
  }
}

// ---- LayerNorm's backward with a saved mean that dwarfs the spread ------------------------------

// x = 10 + U(0, 1e-3): |mean| * rstd is about 3e4, so the saved f32 mean's rounding would shift every
// x-hat; the backward recomputes such rows' statistics from x and matches the double oracle.
TEST(Extremes, LayerNormBackwardRecomputesAMeanThatDwarfsTheSpread) {
  Case c = RowCase(Op::kLayerNorm, 5, 4096);
  Inputs in = ZeroInputs(c);
  std::mt19937 rng(18);
  std::uniform_real_distribution<double> jitter(0.0, 1e-3);
  for (int64_t i = 0; i < c.rows * c.cols; ++i) in.x.set(i, 10.0 + jitter(rng));
  for (int64_t i = 0; i < c.cols; ++i) in.weight[size_t(i)] = 1.0f + 0.001f * float(i % 13);
  const Outputs saved = RunForward(c, in, RMSNORM_BACKEND_AUTO);  // f32 mean and rstd, as saved in training
  // The oracle: statistics recomputed from x in double.
  const Outputs oracle_forward = RunForward(c, in, RMSNORM_BACKEND_REFERENCE);
  const Outputs oracle = RunBackward(c, in, nullptr, RMSNORM_BACKEND_REFERENCE);
  const Tolerances bt = BackwardTolerances(c, in, oracle_forward);
  ExpectBackwardOnEveryTargetWithin(c, in, saved, oracle, bt);
  const Outputs reference = RunBackward(c, in, &saved, RMSNORM_BACKEND_REFERENCE);
  EXPECT_EQ("", Compare("reference dweight", Values(reference.dweight), Values(oracle.dweight), bt.dweight));
}

// The statistics multiply by 2^-m where they divide by a count that is a power of two (cpu::DivideBy),
// which must round as the division does: subnormal results, the smallest square of a subnormal f32,
// sums near f32's top, zero, infinity and NaN.
TEST(Extremes, PowerOfTwoDivisorRoundsAsTheDivision) {
  std::mt19937_64 rng(19);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  std::uniform_int_distribution<int> exponent(-1022, 1023);
  std::vector<double> values = {0.0, -0.0, 0x1.23456789p-1000, 0x1p-298, 0x1p-149, 0x1.fffffep127, 1.0, kInf, -kInf,
                                std::numeric_limits<double>::quiet_NaN()};
  for (int i = 0; i < 2000; ++i) values.push_back(std::ldexp(mantissa(rng), exponent(rng)) * (i % 2 ? 1 : -1));
  for (int64_t divisor : {int64_t{1}, int64_t{2}, int64_t{128}, int64_t{4096}, int64_t{1} << 40, int64_t{1} << 62,
                          int64_t{3}, int64_t{100}, int64_t{1229}, (int64_t{1} << 40) + 1}) {
    for (double v : values) {
      const double expected = v / double(divisor), got = cpu::DivideBy(v, divisor);
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(got)) << v << " / " << divisor;
      } else {
        EXPECT_EQ(std::signbit(expected), std::signbit(got)) << v << " / " << divisor;
        EXPECT_EQ(expected, got) << v << " / " << divisor;
      }
    }
  }
}

}  // namespace
}  // namespace rmsnorm::test
