// The paper's invariance properties (its Table 1) and equalities, on the fast kernels: what must hold
// holds to f32 precision, and what must not hold fails by a wide, measurable margin.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "rmsnorm/rmsnorm.hpp"

namespace rmsnorm::test {
namespace {

constexpr int64_t kRows = 4, kCols = 96;

std::vector<float> RandomRows(uint32_t seed, double mean = 0.7, double spread = 1.5) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> value(mean, spread);
  std::vector<float> x(kRows * kCols);
  for (float& v : x) v = float(value(rng));
  return x;
}

std::vector<float> Gains(uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> value(1.0, 0.3);
  std::vector<float> w(kCols);
  for (float& v : w) v = float(value(rng));
  return w;
}

std::vector<float> Scaled(const std::vector<float>& x, double scale, double shift = 0.0) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = float(double(x[i]) * scale + shift);
  return out;
}

std::vector<float> Rms(const std::vector<float>& x, const NormArgs& args, std::vector<float>* rstd = nullptr) {
  std::vector<float> y(x.size());
  if (rstd) rstd->resize(kRows);
  rms_norm<float>(matrix(x, kCols), matrix(y, kCols), args, rstd ? Span<float>(*rstd) : Span<float>());
  return y;
}

std::vector<float> Layer(const std::vector<float>& x, const NormArgs& args) {
  std::vector<float> y(x.size());
  layer_norm<float>(matrix(x, kCols), matrix(y, kCols), args);
  return y;
}

std::vector<float> L2(const std::vector<float>& x, const NormArgs& args, std::vector<float>* rstd = nullptr) {
  std::vector<float> y(x.size());
  if (rstd) rstd->resize(kRows);
  l2_norm<float>(matrix(x, kCols), matrix(y, kCols), args, rstd ? Span<float>(*rstd) : Span<float>());
  return y;
}

double MaxDifference(const std::vector<float>& a, const std::vector<float>& b, double scale_b = 1.0) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::fabs(double(a[i]) - double(b[i]) * scale_b));
  return worst;
}

// Normalized outputs are O(1); f32 arithmetic over kCols terms keeps them within this.
constexpr double kF32Tolerance = 2e-6;

TEST(Invariance, RmsNormIsInvariantToRescalingTheInput) {
  const std::vector<float> x = RandomRows(1), w = Gains(2);
  for (float partial : {1.0f, 0.0625f}) {
    const NormArgs args = NormArgs{}.with_weight(w).with_eps(0.0f).with_partial(partial);
    const std::vector<float> y = Rms(x, args);
    // Powers of two scale exactly; the others round x, so compare to f32 precision.
    for (double delta : {1e-3, 0.37, 7.5, 1024.0, 1e4}) {
      EXPECT_LT(MaxDifference(Rms(Scaled(x, delta), args), y), kF32Tolerance) << "delta " << delta << " p " << partial;
    }
    // Far beyond f32's squared range (the rows take the double path): still invariant.
    for (double delta : {1e30, 1e-30}) {
      EXPECT_LT(MaxDifference(Rms(Scaled(x, delta), args), y), kF32Tolerance) << "delta " << delta;
    }
  }
}

TEST(Invariance, RmsNormIsInvariantToRescalingTheWeightMatrix) {
  // x = W h: scaling W by delta scales every x by delta, and the normalized output stays.
  std::mt19937 rng(3);
  std::normal_distribution<double> unit(0.0, 1.0);
  const int64_t inputs = 24;
  std::vector<double> weight_matrix(size_t(kCols * inputs)), h(size_t(kRows * inputs));
  for (double& v : weight_matrix) v = unit(rng);
  for (double& v : h) v = unit(rng);
  auto project = [&](double delta) {
    std::vector<float> x(kRows * kCols);
    for (int64_t r = 0; r < kRows; ++r)
      for (int64_t c = 0; c < kCols; ++c) {
        double sum = 0.0;
        for (int64_t i = 0; i < inputs; ++i) sum += delta * weight_matrix[size_t(c * inputs + i)] * h[size_t(r * inputs + i)];
        x[size_t(r * kCols + c)] = float(sum);
      }
    return x;
  };
  const std::vector<float> w = Gains(4);
  const NormArgs args = NormArgs{}.with_weight(w).with_eps(0.0f);
  const std::vector<float> y = Rms(project(1.0), args);
  for (double delta : {0.01, 3.0, 250.0}) EXPECT_LT(MaxDifference(Rms(project(delta), args), y), kF32Tolerance);
}

TEST(Invariance, RmsNormIsNotInvariantToRecentering) {
  const std::vector<float> x = RandomRows(5);
  const NormArgs args = NormArgs{}.with_eps(0.0f);
  const std::vector<float> y = Rms(x, args);
  for (double shift : {0.5, 1.0, -2.0}) {
    EXPECT_GT(MaxDifference(Rms(Scaled(x, 1.0, shift), args), y), 0.05) << "shift " << shift;
  }
}

TEST(Invariance, LayerNormIsInvariantToRescalingAndRecentering) {
  const std::vector<float> x = RandomRows(6), w = Gains(7);
  const NormArgs args = NormArgs{}.with_weight(w).with_eps(0.0f);
  const std::vector<float> y = Layer(x, args);
  for (double delta : {0.25, 3.0, 100.0}) {
    for (double shift : {0.0, 1.0, -20.0}) {
      // A shift of s costs the centered values about s * eps32 each: scale the tolerance with it.
      const double tolerance = kF32Tolerance * (1.0 + std::fabs(shift) / delta);
      EXPECT_LT(MaxDifference(Layer(Scaled(x, delta, shift), args), y), tolerance)
          << "delta " << delta << " shift " << shift;
    }
  }
}

TEST(Invariance, PartialOneIsRmsNormBitForBit) {
  const std::vector<float> x = RandomRows(8), w = Gains(9);
  // 0.99999 * 96 = 95.999...: k = ceil = 96 = n, the statistic of RMSNorm over the same elements.
  const std::vector<float> full = Rms(x, NormArgs{}.with_weight(w));
  const std::vector<float> nearly = Rms(x, NormArgs{}.with_weight(w).with_partial(0.99999f));
  EXPECT_EQ(full, nearly);
  // And pRMSNorm over fewer elements is a different norm, measurably.
  EXPECT_GT(MaxDifference(Rms(x, NormArgs{}.with_weight(w).with_partial(0.0625f)), full), 0.01);
}

TEST(Invariance, RmsNormEqualsLayerNormOnZeroMeanRows) {
  // Rows of +v, -v pairs have a mean of exactly 0.
  std::vector<float> x = RandomRows(10);
  for (int64_t r = 0; r < kRows; ++r)
    for (int64_t c = 0; c < kCols; c += 2) x[size_t(r * kCols + c + 1)] = -x[size_t(r * kCols + c)];
  const std::vector<float> w = Gains(11);
  const NormArgs args = NormArgs{}.with_weight(w).with_eps(1e-5f);
  EXPECT_LT(MaxDifference(Rms(x, args), Layer(x, args)), kF32Tolerance);
  // On rows with a mean, they differ.
  const std::vector<float> shifted = RandomRows(12, 1.0);
  EXPECT_GT(MaxDifference(Rms(shifted, args), Layer(shifted, args)), 0.05);
}

TEST(Invariance, L2NormIsRmsNormScaledByOneOverSqrtN) {
  const std::vector<float> x = RandomRows(13), w = Gains(14);
  const NormArgs args = NormArgs{}.with_weight(w).with_eps(0.0f);
  std::vector<float> rstd_rms, rstd_l2;
  const std::vector<float> rms = Rms(x, args, &rstd_rms);
  const std::vector<float> l2 = L2(x, args, &rstd_l2);
  const double root_n = std::sqrt(double(kCols));
  EXPECT_LT(MaxDifference(l2, rms, 1.0 / root_n), kF32Tolerance);
  for (int64_t r = 0; r < kRows; ++r) EXPECT_NEAR(rstd_l2[size_t(r)], rstd_rms[size_t(r)] / root_n, 1e-6 * rstd_l2[size_t(r)]);
  EXPECT_GT(MaxDifference(l2, rms), 0.5);  // not the same norm: off by sqrt(n)
}

// The paper's implicit learning-rate adaptation: scaling the input by delta leaves the gain's gradient
// and scales the input's gradient by 1/delta.
TEST(Invariance, GradientsUnderInputRescaling) {
  const std::vector<float> x = RandomRows(15), w = Gains(16);
  std::mt19937 rng(17);
  std::normal_distribution<double> unit(0.0, 1.0);
  std::vector<float> dy(x.size());
  for (float& v : dy) v = float(unit(rng));
  for (float partial : {1.0f, 0.25f}) {
    const NormArgs args = NormArgs{}.with_weight(w).with_eps(0.0f).with_partial(partial);
    auto backward = [&](const std::vector<float>& input, std::vector<float>* dweight) {
      std::vector<float> dx(input.size());
      dweight->resize(kCols);
      std::vector<float> dbias(kCols);
      rms_norm_backward<float>(matrix(dy, kCols), matrix(input, kCols), matrix(dx, kCols), args, {},
                               ParamGrads{*dweight, dbias});
      return dx;
    };
    std::vector<float> dweight;
    const std::vector<float> dx = backward(x, &dweight);
    for (double delta : {0.1, 8.0, 300.0}) {
      std::vector<float> dweight_scaled;
      const std::vector<float> dx_scaled = backward(Scaled(x, delta), &dweight_scaled);
      EXPECT_LT(MaxDifference(dweight_scaled, dweight), 1e-5) << "delta " << delta;
      EXPECT_LT(MaxDifference(dx_scaled, dx, 1.0 / delta), 1e-5 / delta) << "delta " << delta;
      EXPECT_GT(MaxDifference(dx_scaled, dx), 0.05 * std::min(1.0, std::fabs(1.0 - 1.0 / delta)))
          << "the input gradient must change with the scale";
    }
  }
}

}  // namespace
}  // namespace rmsnorm::test
