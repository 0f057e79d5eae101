#include "common/norm_layer.h"

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "rmsnorm/rmsnorm.hpp"

namespace repro {
namespace {

const NormKind kAll[] = {NormKind::kNone, NormKind::kLayerNorm, NormKind::kL2Norm, NormKind::kRMSNorm,
                         NormKind::kPRMSNorm};

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

const char* norm_name(NormKind kind) {
  switch (kind) {
    case NormKind::kNone: return "none";
    case NormKind::kLayerNorm: return "layernorm";
    case NormKind::kL2Norm: return "l2norm";
    case NormKind::kRMSNorm: return "rmsnorm";
    case NormKind::kPRMSNorm: return "prmsnorm";
  }
  return "?";
}

NormKind parse_norm(const std::string& name) {
  for (NormKind k : kAll)
    if (name == norm_name(k)) return k;
  throw std::invalid_argument("unknown norm '" + name + "': use none, layernorm, l2norm, rmsnorm or prmsnorm");
}

std::vector<NormKind> all_norms() { return std::vector<NormKind>(std::begin(kAll), std::end(kAll)); }

NormLayer::NormLayer(const std::string& name, int64_t cols, const NormConfig& config, NormClock* clock)
    : gain(name + ".gain", cols, /*decays=*/false),
      bias(name + ".bias", cols, /*decays=*/false),
      cols_(cols),
      config_(config),
      clock_(clock),
      dgain_(cols),
      dbias_(cols) {
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
    case NormKind::kRMSNorm:
      rmsnorm::rms_norm<float>(xm, ym, args, {rstd, rows});
      return;
    case NormKind::kPRMSNorm:
      rmsnorm::rms_norm<float>(xm, ym, rmsnorm::NormArgs(args).with_partial(config_.partial), {rstd, rows});
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
    case NormKind::kRMSNorm:
      rmsnorm::rms_norm_backward<float>(dym, xm, dxm, args, {rstd, rows}, grads);
      break;
    case NormKind::kPRMSNorm:
      rmsnorm::rms_norm_backward<float>(dym, xm, dxm, rmsnorm::NormArgs(args).with_partial(config_.partial),
                                        {rstd, rows}, grads);
      break;
  }
  for (int64_t i = 0; i < cols_; ++i) {
    gain.grad[i] += dgain_[i];
    bias.grad[i] += dbias_[i];
  }
}

}  // namespace repro
