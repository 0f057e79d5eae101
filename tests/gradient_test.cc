// Gradients against finite differences, for every norm, with respect to x, gain and bias.
//
// The reference's backward runs in double against central differences of its forward in double (a
// tight check of the formulas); the SIMD kernels' backward (f32) against the same differences at f32
// precision (a check of the fast code against the definition, not only against the reference).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ref/norms.h"
#include "rmsnorm/rmsnorm.h"
#include "test_util.h"

namespace rmsnorm::test {
namespace {

struct GradCase {
  Op op;
  int64_t rows, cols;
  float partial;
  float eps;
  float offset;
  bool weight, bias;
};

std::string Describe(const GradCase& g) {
  return std::string(OpName(g.op)) + " " + std::to_string(g.rows) + "x" + std::to_string(g.cols) +
         " p=" + std::to_string(g.partial) + " eps=" + std::to_string(g.eps) + " offset=" + std::to_string(g.offset) +
         (g.weight ? " +w" : "") + (g.bias ? " +b" : "");
}

Problem ProblemFor(const GradCase& g) {
  Problem p;
  p.rows = g.rows;
  p.cols = g.cols;
  p.eps = g.eps;
  p.weight_offset = g.offset;
  p.k = g.op == Op::kRmsNorm || g.op == Op::kAddRmsNorm ? rmsnorm_partial_size(g.cols, g.partial) : g.cols;
  p.divisor = g.op == Op::kL2Norm ? 1 : p.k;
  return p;
}

// Everything in double: x, the residual (fused add), gain, bias, and dy = the loss's weights, so
// that loss = sum(dy * y).
struct Params {
  std::vector<double> x, residual, weight, bias, dy;
};

// Values keep away from 0, where a norm over few elements with eps = 0 turns singular and finite
// differences stop approximating the derivative.
Params RandomParams(const GradCase& g, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> unit(0.0, 1.0);
  std::bernoulli_distribution negative(0.4);
  Params p;
  for (int64_t i = 0; i < g.rows * g.cols; ++i) {
    p.x.push_back((negative(rng) ? -1.0 : 1.0) * (0.3 + std::fabs(unit(rng))));
    p.residual.push_back(0.05 * unit(rng));
    p.dy.push_back(unit(rng));
  }
  for (int64_t i = 0; i < g.cols; ++i) {
    p.weight.push_back((g.offset != 0.0f ? 0.0 : 1.0) + 0.3 * unit(rng));
    p.bias.push_back(0.5 * unit(rng));
  }
  return p;
}

// The reference forward in double. h: the stored x + residual of the fused add; mean, rstd may be null.
void ForwardDouble(const GradCase& g, const Params& p, std::vector<double>* y, std::vector<double>* h,
                   double* mean = nullptr, double* rstd = nullptr) {
  y->resize(p.x.size());
  h->resize(p.x.size());
  ref::Forward<double, double> f;
  f.x = p.x.data();
  f.residual = g.op == Op::kAddRmsNorm ? p.residual.data() : nullptr;
  f.residual_out = h->data();
  f.weight = g.weight ? p.weight.data() : nullptr;
  f.bias = g.bias ? p.bias.data() : nullptr;
  f.y = y->data();
  f.mean = mean;
  f.rstd = rstd;
  g.op == Op::kLayerNorm ? ref::LayerNormForward(ProblemFor(g), f) : ref::RmsForward(ProblemFor(g), f);
}

// The loss sum(dy * y) of the reference forward in double.
double Loss(const GradCase& g, const Params& p) {
  std::vector<double> y, h;
  ForwardDouble(g, p, &y, &h);
  double loss = 0.0;
  for (size_t i = 0; i < y.size(); ++i) loss += p.dy[i] * y[i];
  return loss;
}

// d loss / d v[i] by central differences with Richardson extrapolation (error O(h^4)).
std::vector<double> NumericalGradient(const GradCase& g, Params p, std::vector<double> Params::*member) {
  std::vector<double>& v = p.*member;
  std::vector<double> grad(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double saved = v[i];
    auto central = [&](double h) {
      v[i] = saved + h;
      const double plus = Loss(g, p);
      v[i] = saved - h;
      const double minus = Loss(g, p);
      v[i] = saved;
      return (plus - minus) / (2 * h);
    };
    const double h = 1e-3 * std::max(1.0, std::fabs(saved));
    grad[i] = (4 * central(h / 2) - central(h)) / 3;
  }
  return grad;
}

struct Grads {
  std::vector<double> dx, dweight, dbias;
  double term_scale = 0.0;  // the largest rstd * |dy * g|: the size of the terms dx cancels
};

// The reference backward in double, with saved statistics (from its forward) or recomputing them.
Grads ReferenceGradient(const GradCase& g, const Params& p, bool saved) {
  const Problem problem = ProblemFor(g);
  std::vector<double> y, h, mean(size_t(g.rows)), rstd(size_t(g.rows));
  ForwardDouble(g, p, &y, &h, mean.data(), rstd.data());

  Grads grads{std::vector<double>(p.x.size()), std::vector<double>(size_t(g.cols)), std::vector<double>(size_t(g.cols))};
  ref::Backward<double, double> b;
  b.dy = p.dy.data();
  b.x = g.op == Op::kAddRmsNorm ? h.data() : p.x.data();
  b.weight = g.weight ? p.weight.data() : nullptr;
  b.mean = saved ? mean.data() : nullptr;
  b.rstd = saved ? rstd.data() : nullptr;
  b.dx = grads.dx.data();
  b.dweight = grads.dweight.data();
  b.dbias = grads.dbias.data();
  g.op == Op::kLayerNorm ? ref::LayerNormBackward(problem, b) : ref::RmsBackward(problem, b);
  return grads;
}

// The SIMD kernels' backward in f32, after their forward, through the C ABI.
Grads KernelGradient(const GradCase& g, const Params& p) {
  Case c;
  c.op = g.op;
  c.rows = g.rows;
  c.cols = g.cols;
  c.partial = g.partial;
  c.eps = g.eps;
  c.weight_offset = g.offset;
  c.weight = g.weight;
  c.bias = g.bias;
  Inputs in;
  in.x = RowTensor(RMSNORM_F32, g.rows, g.cols);
  in.residual = RowTensor(RMSNORM_F32, g.rows, g.cols);
  in.dy = RowTensor(RMSNORM_F32, g.rows, g.cols);
  for (int64_t i = 0; i < g.rows * g.cols; ++i) {
    in.x.set(i, p.x[size_t(i)]);
    in.residual.set(i, p.residual[size_t(i)]);
    in.dy.set(i, p.dy[size_t(i)]);
  }
  if (g.weight) in.weight.assign(p.weight.begin(), p.weight.end());
  if (g.bias) in.bias.assign(p.bias.begin(), p.bias.end());
  const Outputs forward = RunForward(c, in, RMSNORM_BACKEND_AUTO);
  const Outputs backward = RunBackward(c, in, &forward, RMSNORM_BACKEND_AUTO);
  Grads grads{Values(backward.dx), Values(backward.dweight), Values(backward.dbias)};
  for (int64_t i = 0; i < g.rows * g.cols; ++i) {
    const double gain = g.weight ? g.offset + p.weight[size_t(i % g.cols)] : 1.0;
    grads.term_scale = std::max(grads.term_scale, forward.rstd[size_t(i / g.cols)] * std::fabs(p.dy[size_t(i)] * gain));
  }
  return grads;
}

// |analytic - numerical| <= relative * (|numerical| + scale) + floor, with scale the largest gradient:
// the floor covers the differences' own rounding noise where a gradient is exactly zero.
void ExpectClose(const char* what, const std::vector<double>& analytic, const std::vector<double>& numerical,
                 double relative, double min_scale = 0.0) {
  double scale = min_scale;
  for (double v : numerical) scale = std::max(scale, std::fabs(v));
  std::vector<double> tolerance;
  for (double v : numerical) tolerance.push_back(relative * (std::fabs(v) + scale) + 1e-9);
  EXPECT_EQ("", Compare(what, analytic, numerical, tolerance));
}

void CheckGradients(const GradCase& g, uint32_t seed) {
  SCOPED_TRACE(Describe(g));
  const Params p = RandomParams(g, seed);
  const std::vector<double> dx = NumericalGradient(g, p, &Params::x);
  const std::vector<double> dweight = NumericalGradient(g, p, &Params::weight);
  const std::vector<double> dbias = NumericalGradient(g, p, &Params::bias);
  for (bool saved : {true, false}) {
    SCOPED_TRACE(saved ? "reference, saved statistics" : "reference, recomputed statistics");
    const Grads ref = ReferenceGradient(g, p, saved);
    ExpectClose("dx", ref.dx, dx, 1e-7);
    if (g.weight) ExpectClose("dweight", ref.dweight, dweight, 1e-7);
    if (g.bias) ExpectClose("dbias", ref.dbias, dbias, 1e-7);
  }
  if (g.op == Op::kAddRmsNorm) {
    // x and residual enter as their sum: the same gradient reaches both.
    ExpectClose("dresidual", ReferenceGradient(g, p, true).dx, NumericalGradient(g, p, &Params::residual), 1e-7);
  }
  SCOPED_TRACE("SIMD kernels (f32)");
  const Grads fast = KernelGradient(g, p);
  ExpectClose("dx", fast.dx, dx, 2e-5, fast.term_scale);
  if (g.weight) ExpectClose("dweight", fast.dweight, dweight, 2e-5);
  if (g.bias) ExpectClose("dbias", fast.dbias, dbias, 2e-5);
}

TEST(Gradients, MatchFiniteDifferences) {
  uint32_t seed = 1;
  for (Op op : {Op::kRmsNorm, Op::kL2Norm, Op::kLayerNorm, Op::kAddRmsNorm}) {
    for (int64_t cols : {1, 2, 5, 16, 37}) {
      for (float partial : {1.0f, 0.5f, 0.25f}) {
        if (partial != 1.0f && (op == Op::kL2Norm || op == Op::kLayerNorm)) continue;
        for (float eps : {0.0f, 1e-2f}) {
          // cols = 1 with eps = 0 is a point where the norm is flat (y = sign(x)); skip the kink.
          if (cols == 1 && eps == 0.0f) continue;
          CheckGradients({op, 3, cols, partial, eps, 0.0f, true, true}, seed++);
          CheckGradients({op, 2, cols, partial, eps, 1.0f, true, false}, seed++);
          CheckGradients({op, 2, cols, partial, eps, 0.0f, false, false}, seed++);
        }
      }
    }
  }
}

}  // namespace
}  // namespace rmsnorm::test
