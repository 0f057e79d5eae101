#include "common/norm_layer.h"

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.hpp"

namespace repro {
namespace {

// The registry's entry of a norm other than kNone (NormKind lists kNone and then the registry's norms).
const rmsnorm::registry::NormInfo& LibraryNorm(NormKind kind) { return rmsnorm::registry::kNorms[size_t(kind) - 1]; }

// Adds the elapsed time of its scope to a NormClock.
class ScopedNormTimer {
 public:
  explicit ScopedNormTimer(NormClock* clock) : clock_(clock), start_(std::chrono::steady_clock::now()) {}
  ~ScopedNormTimer() {
    if (clock_ == nullptr) return;
    clock_->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    clock_->calls += 1;
  }

 private:
  NormClock* clock_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace

const char* norm_name(NormKind kind) { return kind == NormKind::kNone ? "none" : LibraryNorm(kind).name; }

std::vector<NormKind> all_norms() {
  std::vector<NormKind> all = {NormKind::kNone};
  for (size_t i = 0; i < std::size(rmsnorm::registry::kNorms); ++i)
    if (!rmsnorm::registry::kNorms[i].fused_add()) all.push_back(NormKind(i + 1));
  return all;
}

NormKind parse_norm(const std::string& name) {
  std::string names;
  for (NormKind k : all_norms()) {
    if (name == norm_name(k)) return k;
    names += std::string(names.empty() ? "" : ", ") + norm_name(k);
  }
  throw std::invalid_argument("unknown norm '" + name + "': use one of " + names);
}

NormLayer::NormLayer(const std::string& name, int64_t cols, const NormConfig& config, NormClock* clock)
    : gain(name + ".gain", cols, /*decays=*/false),
      bias(name + ".bias", cols, /*decays=*/false),
      cols_(cols),
      config_(config),
      clock_(clock),
      dgain_(cols),
      dbias_(cols) {
  if (config.kind == NormKind::kAddRmsNorm)
    throw std::invalid_argument("add_rmsnorm is the fused residual add, not a normalization layer");
  gain.fill(1.0f);
}

void NormLayer::collect(std::vector<Param*>& params) {
  if (config_.kind != NormKind::kNone) params.push_back(&gain);
  params.push_back(&bias);
}

void NormLayer::forward(const float* x, float* y, float* mean, float* rstd, int64_t rows) {
  ScopedNormTimer timer(clock_);
  const auto xm = rmsnorm::matrix(x, rows, cols_);
  const auto ym = rmsnorm::matrix(y, rows, cols_);
  const auto args = rmsnorm::NormArgs{}.with_weight(gain.value).with_bias(bias.value).with_eps(config_.eps);
  switch (config_.kind) {
    case NormKind::kNone:
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t i = 0; i < cols_; ++i) y[r * cols_ + i] = x[r * cols_ + i] + bias.value[i];
      return;
    case NormKind::kLayerNorm:
      rmsnorm::layer_norm<float>(xm, ym, args, {mean, rows}, {rstd, rows});
      return;
    case NormKind::kL2Norm:
      rmsnorm::l2_norm<float>(xm, ym, args, {rstd, rows});
      return;
    case NormKind::kRmsNorm:
      rmsnorm::rms_norm<float>(xm, ym, args, {rstd, rows});
      return;
    case NormKind::kPRmsNorm:
      rmsnorm::rms_norm<float>(xm, ym, rmsnorm::NormArgs(args).with_partial(config_.partial), {rstd, rows});
      return;
    case NormKind::kAddRmsNorm:  // refused by the constructor
      return;
  }
}

void NormLayer::backward(const float* dy, const float* x, const float* mean, const float* rstd, float* dx,
                         int64_t rows) {
  ScopedNormTimer timer(clock_);
  if (config_.kind == NormKind::kNone) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < cols_; ++i) {
        bias.grad[i] += dy[r * cols_ + i];
        dx[r * cols_ + i] = dy[r * cols_ + i];
      }
    return;
  }
  const auto dym = rmsnorm::matrix(dy, rows, cols_);
  const auto xm = rmsnorm::matrix(x, rows, cols_);
  const auto dxm = rmsnorm::matrix(dx, rows, cols_);
  const auto args = rmsnorm::NormArgs{}.with_weight(gain.value).with_eps(config_.eps);
  const rmsnorm::ParamGrads grads{dgain_, dbias_};
  switch (config_.kind) {
    case NormKind::kNone: break;
    case NormKind::kLayerNorm:
      rmsnorm::layer_norm_backward<float>(dym, xm, dxm, args, {mean, rows}, {rstd, rows}, grads);
      break;
    case NormKind::kL2Norm:
      rmsnorm::l2_norm_backward<float>(dym, xm, dxm, args, {rstd, rows}, grads);
      break;
    case NormKind::kRmsNorm:
      rmsnorm::rms_norm_backward<float>(dym, xm, dxm, args, {rstd, rows}, grads);
      break;
    case NormKind::kPRmsNorm:
      rmsnorm::rms_norm_backward<float>(dym, xm, dxm, rmsnorm::NormArgs(args).with_partial(config_.partial),
                                        {rstd, rows}, grads);
      break;
    case NormKind::kAddRmsNorm:  // refused by the constructor
      break;
  }
  for (int64_t i = 0; i < cols_; ++i) {
    gain.grad[i] += dgain_[i];
    bias.grad[i] += dbias_[i];
  }
}

}  // namespace repro
