#include "test_util.h"

#include <algorithm>
#include <cctype>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "cpu/native_bf16.h"
#include "hwy/targets.h"

namespace rmsnorm::test {

// ---- Row tensors --------------------------------------------------------------------------------

RowTensor::RowTensor(rmsnorm_dtype dtype, int64_t rows, int64_t cols)
    : dtype_(dtype), rows_(rows), cols_(cols), bytes_(size_t(rows * cols) * registry::DtypeSize(dtype)) {}

double RowTensor::get(int64_t i) const {
  double v = 0.0;
  registry::WithStorage(dtype_, [&](auto storage) {
    std::memcpy(&storage, bytes_.data() + sizeof storage * size_t(i), sizeof storage);
    v = registry::ToFloat(storage);
  });
  return v;
}

void RowTensor::set(int64_t i, double v) {  // rounds to f32, then to the dtype
  registry::WithStorage(dtype_, [&](auto storage) {
    storage = registry::FromFloat<decltype(storage)>(static_cast<float>(v));
    std::memcpy(bytes_.data() + sizeof storage * size_t(i), &storage, sizeof storage);
  });
}

const std::vector<rmsnorm_dtype>& AllDtypes() {
  static const std::vector<rmsnorm_dtype> all = [] {
    std::vector<rmsnorm_dtype> v;
    for (const registry::DtypeInfo& d : registry::kDtypes) v.push_back(d.code);
    return v;
  }();
  return all;
}

double Ulp(rmsnorm_dtype dtype, double v) {
  const int mantissa_bits = registry::Dtype(dtype).mantissa_bits;
  const int min_exponent = registry::Dtype(dtype).min_exponent;
  const double magnitude = std::fabs(v);
  int exponent = magnitude > 0 && std::isfinite(magnitude) ? std::ilogb(magnitude) : min_exponent;
  if (exponent < min_exponent) exponent = min_exponent;
  return std::ldexp(1.0, exponent - mantissa_bits);
}

// ---- Cases --------------------------------------------------------------------------------------

const char* OpName(Op op) { return registry::Info(op).name; }

std::string Case::Name() const {
  std::ostringstream s;
  s << OpName(op) << " " << DtypeName(dtype) << " " << rows << "x" << cols << " p=" << partial << " eps=" << eps
    << " offset=" << weight_offset << (weight ? " +w" : "") << (bias ? " +b" : "") << " seed=" << seed;
  return s.str();
}

rmsnorm_config Case::Config() const {
  rmsnorm_config c = rmsnorm_config_init(rows, cols);
  c.dtype = dtype;
  c.eps = eps;
  c.partial = partial;
  c.weight_offset = weight_offset;
  return c;
}

uint64_t SplitMix(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Uniform(uint64_t& state, double center, double spread) {
  const double unit = double(SplitMix(state) >> 40) * 0x1p-24;
  return center + spread * (2.0 * unit - 1.0);
}

Inputs MakeInputs(const Case& c) {
  uint64_t state = c.seed;
  Inputs in;
  in.x = RowTensor(c.dtype, c.rows, c.cols);
  in.residual = RowTensor(c.dtype, c.rows, c.cols);
  in.dy = RowTensor(c.dtype, c.rows, c.cols);
  for (int64_t i = 0; i < c.rows * c.cols; ++i) {
    in.x.set(i, Uniform(state, 0.7, 2.5));
    in.residual.set(i, Uniform(state, 0.0, 1.5));
    in.dy.set(i, Uniform(state, 0.0, 1.5));
  }
  // With an offset the stored weight is a correction around 0 (Gemma); without, a gain around 1.
  const double weight_center = c.weight_offset != 0.0f ? 0.0 : 1.0;
  for (int64_t i = 0; c.weight && i < c.cols; ++i) in.weight.push_back(float(Uniform(state, weight_center, 0.5)));
  for (int64_t i = 0; c.bias && i < c.cols; ++i) in.bias.push_back(float(Uniform(state, 0.0, 0.8)));
  return in;
}

namespace {

const float* OrNull(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }
float* OrNull(std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

void Expect(rmsnorm_status status, const char* what) {
  if (status != RMSNORM_OK) throw std::runtime_error(std::string(what) + " failed: " + rmsnorm_last_error());
}

class ScopedBackend {
 public:
  explicit ScopedBackend(rmsnorm_backend b) : saved_(rmsnorm_get_backend()) { rmsnorm_set_backend(b); }
  ~ScopedBackend() { rmsnorm_set_backend(saved_); }

 private:
  rmsnorm_backend saved_;
};

}  // namespace

Outputs RunForward(const Case& c, const Inputs& in, rmsnorm_backend backend) {
  ScopedBackend scoped(backend);
  return RunForward(c, in);
}

Outputs RunBackward(const Case& c, const Inputs& in, const Outputs* saved, rmsnorm_backend backend) {
  ScopedBackend scoped(backend);
  return RunBackward(c, in, saved);
}

Outputs RunForward(const Case& c, const Inputs& in) {
  const rmsnorm_config config = c.Config();
  const registry::OpInfo& op = registry::Info(registry::Info(c.op).forward);
  Outputs out;
  out.y = RowTensor(c.dtype, c.rows, c.cols);
  out.rstd.assign(size_t(c.rows), -1.0f);
  if (op.Takes(registry::kMean)) out.mean.assign(size_t(c.rows), -1.0f);
  if (op.Takes(registry::kResidualOut)) out.residual_out = RowTensor(c.dtype, c.rows, c.cols);
  registry::TensorPointers t;  // the op takes those it lists
  t.Set(registry::kX, in.x.data());
  t.Set(registry::kResidual, in.residual.data());
  t.Set(registry::kWeight, OrNull(in.weight));
  t.Set(registry::kBias, OrNull(in.bias));
  t[registry::kY] = out.y.data();
  t[registry::kResidualOut] = out.residual_out.data();
  t[registry::kMean] = OrNull(out.mean);
  t[registry::kRstd] = out.rstd.data();
  Expect(op.Call(&config, t), op.c_function);
  return out;
}

Outputs RunBackward(const Case& c, const Inputs& in, const Outputs* saved) {
  const rmsnorm_config config = c.Config();
  const registry::NormInfo& norm = registry::Info(c.op);
  const registry::OpInfo& op = registry::Info(norm.backward);
  Outputs out;
  out.dx = RowTensor(c.dtype, c.rows, c.cols);
  out.dweight.assign(size_t(c.cols), -1.0f);
  out.dbias.assign(size_t(c.cols), -1.0f);
  registry::TensorPointers t;
  t.Set(registry::kDy, in.dy.data());
  // The fused add's backward is the norm's backward at h = residual_out.
  t.Set(registry::kX, norm.fused_add() ? saved->residual_out.data() : in.x.data());
  t.Set(registry::kWeight, OrNull(in.weight));
  t.Set(registry::kMean, saved ? OrNull(saved->mean) : nullptr);
  t.Set(registry::kRstd, saved ? saved->rstd.data() : nullptr);
  t[registry::kDx] = out.dx.data();
  t[registry::kDweight] = out.dweight.data();
  t[registry::kDbias] = out.dbias.data();
  Expect(op.Call(&config, t), op.c_function);
  return out;
}

// ---- Comparison ---------------------------------------------------------------------------------

std::vector<double> Values(const RowTensor& t) {
  std::vector<double> v(size_t(t.size()));
  for (int64_t i = 0; i < t.size(); ++i) v[size_t(i)] = t.get(i);
  return v;
}

std::vector<double> Values(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

std::string Compare(const char* what, const std::vector<double>& got, const std::vector<double>& want,
                    const std::vector<double>& tolerance) {
  if (got.size() != want.size() || want.size() != tolerance.size())
    return std::string(what) + ": sizes differ";
  size_t worst = 0, failures = 0;
  double worst_ratio = 0.0, max_difference = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const bool both_nan = std::isnan(got[i]) && std::isnan(want[i]);
    const double difference = both_nan ? 0.0 : std::fabs(got[i] - want[i]);
    const double ratio = (got[i] == want[i] || both_nan) ? 0.0 : difference / tolerance[i];
    if (!(ratio <= 1.0)) ++failures;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
    if (!(difference <= max_difference)) max_difference = difference;
  }
  if (failures == 0) return "";
  char text[512];
  std::snprintf(text, sizeof text,
                "%s: %zu of %zu elements beyond tolerance; worst [%zu] got %.9g want %.9g (diff %.3g, tolerance %.3g); "
                "max diff %.3g",
                what, failures, got.size(), worst, got[worst], want[worst], std::fabs(got[worst] - want[worst]),
                tolerance[worst], max_difference);
  return text;
}

namespace {

constexpr double kUnit = FLT_EPSILON / 2;  // f32 unit roundoff
// The f32 path rounds products such as x * rstd to f32 before a later factor scales them: below f32's
// normal range that rounding is absolute, up to this, and the later factors scale it (the header's
// Extremes). 2^-149 is twice the bound, for the rounding of the factor's product.
constexpr double kSubnormalUnit = 0x1p-149;
// Rows past this rstd take the double path (statistics.h, kMaxF32Rstd), which has no f32 intermediates.
constexpr double kMaxF32PathRstd = 0x1p45;

// How many units of roundoff a reduction over n f32 terms (in lanes, then chunks folded in double)
// may contribute, with room for the few roundings around it.
double Growth(int64_t n) { return 16.0 + 2.0 * std::sqrt(double(n)); }

double GainMagnitude(const Case& c, const Inputs& in, int64_t i) {
  return c.weight ? std::fabs(c.weight_offset) + std::fabs(in.weight[size_t(i)]) : 1.0;
}

double Gain(const Case& c, const Inputs& in, int64_t i) {
  return c.weight ? double(c.weight_offset) + in.weight[size_t(i)] : 1.0;
}

// The value the norm normalizes: x, or the stored x + residual.
const RowTensor& Normalized(const Case& c, const Inputs& in, const Outputs& ref) {
  return c.op == Op::kAddRmsNorm ? ref.residual_out : in.x;
}

int64_t StatisticLength(const Case& c) {
  return c.op == Op::kRmsNorm || c.op == Op::kAddRmsNorm ? rmsnorm_partial_size(c.cols, c.partial) : c.cols;
}

}  // namespace

Tolerances ForwardTolerances(const Case& c, const Inputs& in, const Outputs& ref) {
  Tolerances t;
  const RowTensor& a = Normalized(c, in, ref);
  const bool layer = c.op == Op::kLayerNorm;
  const double growth = Growth(StatisticLength(c));
  for (int64_t row = 0; row < c.rows; ++row) {
    const double rstd = ref.rstd[size_t(row)];
    double mean = 0.0;
    for (int64_t i = 0; i < c.cols; ++i) mean += a.get(row * c.cols + i) / double(c.cols);
    // LayerNorm works on deviations from the mean (the kernels' moments and centering are accurate to
    // the spread, not to the mean's magnitude): its errors scale with them.
    double mean_deviation = 0.0;
    for (int64_t i = 0; i < c.cols; ++i) mean_deviation += std::fabs(a.get(row * c.cols + i) - mean) / double(c.cols);
    t.rstd.push_back(kUnit * growth * rstd + Ulp(RMSNORM_F32, rstd));
    if (layer) t.mean.push_back(kUnit * growth * mean_deviation + Ulp(RMSNORM_F32, mean));
    for (int64_t i = 0; i < c.cols; ++i) {
      const int64_t at = row * c.cols + i;
      const double v = layer ? std::fabs(a.get(at) - mean) + mean_deviation : std::fabs(a.get(at));
      const double bias = c.bias ? std::fabs(in.bias[size_t(i)]) : 0.0;
      const double magnitude = v * rstd * GainMagnitude(c, in, i) + bias;
      const double subnormal = kSubnormalUnit * GainMagnitude(c, in, i);
      t.y.push_back(Ulp(c.dtype, ref.y.get(at)) + kUnit * (growth + 8) * magnitude + subnormal);
    }
  }
  return t;
}

Tolerances BackwardTolerances(const Case& c, const Inputs& in, const Outputs& ref_forward) {
  Tolerances t;
  const RowTensor& a = Normalized(c, in, ref_forward);
  const bool layer = c.op == Op::kLayerNorm;
  const int64_t k = StatisticLength(c);
  const double divisor = c.op == Op::kL2Norm ? 1.0 : double(layer ? c.cols : k);
  const double growth = Growth(c.cols);
  std::vector<double> dweight_magnitude(size_t(c.cols)), dbias_magnitude(size_t(c.cols));
  std::vector<double> dweight_subnormal(size_t(c.cols));
  for (int64_t row = 0; row < c.rows; ++row) {
    const double rstd = ref_forward.rstd[size_t(row)];
    const double mean = layer ? double(ref_forward.mean[size_t(row)]) : 0.0;
    // A recomputed mean is off by about the deviations' rounding, which every xhat inherits.
    double mean_deviation = 0.0;
    for (int64_t i = 0; layer && i < c.cols; ++i) mean_deviation += std::fabs(a.get(row * c.cols + i) - mean) / c.cols;
    auto xhat_magnitude = [&](int64_t at) { return (std::fabs(a.get(at) - mean) + mean_deviation) * rstd; };
    double sum_u_xhat = 0.0, sum_u = 0.0, sum_xhat = 0.0;
    for (int64_t i = 0; i < c.cols; ++i) {
      const int64_t at = row * c.cols + i;
      const double u = std::fabs(in.dy.get(at) * Gain(c, in, i));
      sum_u += u;
      sum_u_xhat += u * xhat_magnitude(at);
      sum_xhat += xhat_magnitude(at);
    }
    // The f32 path's intermediates below f32's normal range (see kSubnormalUnit): xhat, u = dy * g and
    // their products each carry up to one such unit, which rstd (and the coefficient, and each dy for
    // dweight) then scales.
    const bool f32_path = rstd <= kMaxF32PathRstd;
    const double coefficient = sum_u_xhat / divisor;
    const double coefficient_subnormal = (sum_xhat + sum_u + double(c.cols)) / divisor;
    for (int64_t i = 0; i < c.cols; ++i) {
      const int64_t at = row * c.cols + i;
      const double dy = std::fabs(in.dy.get(at));
      const double xhat = xhat_magnitude(at);
      const double correction = layer ? sum_u / c.cols + xhat * sum_u_xhat / c.cols
                                      : (i < k ? xhat * sum_u_xhat / divisor : 0.0);
      const double magnitude = rstd * (dy * GainMagnitude(c, in, i) + correction);
      // The reference's dx is itself rounded to the dtype: compare within one unit of it.
      const double subnormal =
          f32_path ? kSubnormalUnit * rstd * (3.0 + coefficient + xhat * coefficient_subnormal) : 0.0;
      t.dx.push_back(Ulp(c.dtype, magnitude) + kUnit * (growth + 8) * magnitude + subnormal);
      if (f32_path) dweight_subnormal[size_t(i)] += kSubnormalUnit * (dy + 1.0);
      dweight_magnitude[size_t(i)] += dy * xhat;
      dbias_magnitude[size_t(i)] += dy;
    }
  }
  for (int64_t i = 0; i < c.cols; ++i) {
    const double rows_growth = double(c.rows) + growth + 8;
    t.dweight.push_back(kUnit * rows_growth * dweight_magnitude[size_t(i)] + FLT_MIN + dweight_subnormal[size_t(i)]);
    t.dbias.push_back(kUnit * rows_growth * dbias_magnitude[size_t(i)] + FLT_MIN);
  }
  return t;
}

// ---- SIMD targets -------------------------------------------------------------------------------

// AVX3 with bf16 rounded by the CPU's instruction: the library's pseudo-target "AVX3_BF16"
// (src/cpu/native_bf16.h), here a bit Highway 1.0.3 leaves unused, above its x86 targets.
constexpr int64_t kAvx3Bf16 = int64_t{1} << 6;
static_assert((HWY_TARGETS & kAvx3Bf16) == 0);

std::vector<int64_t> AvailableTargets() {
  std::vector<int64_t> targets = hwy::SupportedAndGeneratedTargets();
  if (HWY_ARCH_X86 && !targets.empty() && targets.front() == HWY_AVX3 && cpu::CpuHasAvx512Bf16())
    targets.insert(targets.begin(), kAvx3Bf16);
  // RMSNORM_TEST_TARGETS (comma-separated names) keeps only those: tests/arm64/run.sh gives an
  // emulated CPU the targets that only a CPU of its vector length runs. Naming none of the CPU's
  // targets is an error, not a run that tests nothing.
  if (const char* only = std::getenv("RMSNORM_TEST_TARGETS")) {
    // Any case, as rmsnorm_set_cpu_target takes them.
    const auto upper = [](std::string text) {
      for (char& c : text) c = char(std::toupper(static_cast<unsigned char>(c)));
      return text;
    };
    const std::string names = upper(std::string(",") + only + ",");
    targets.erase(std::remove_if(targets.begin(), targets.end(),
                                 [&](int64_t t) { return names.find(upper("," + TargetName(t) + ",")) == std::string::npos; }),
                  targets.end());
    if (targets.empty()) throw std::runtime_error(std::string("RMSNORM_TEST_TARGETS=") + only + " names no target of this CPU");
  }
  return targets;
}
std::string TargetName(int64_t target) { return target == kAvx3Bf16 ? "AVX3_BF16" : hwy::TargetName(target); }
// Both the library's choice (its own) and Highway's (for the kernels compiled into the tests, which
// also follow this binary's copy of the native-bf16 switch).
ScopedTarget::ScopedTarget(int64_t target) {
  hwy::SetSupportedTargetsForTest(target == kAvx3Bf16 ? HWY_AVX3 : target);
  cpu::native_bf16_rounding = target == kAvx3Bf16;
  if (rmsnorm_set_cpu_target(TargetName(target).c_str()) != RMSNORM_OK) throw std::runtime_error(rmsnorm_last_error());
}
ScopedTarget::~ScopedTarget() {
  hwy::SetSupportedTargetsForTest(0);
  rmsnorm_set_cpu_target(std::getenv("RMSNORM_CPU_TARGET"));
  cpu::native_bf16_rounding = std::strcmp(rmsnorm_cpu_target(), "AVX3_BF16") == 0;
}

}  // namespace rmsnorm::test
