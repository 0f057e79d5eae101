#include "common/adam.h"

#include <algorithm>
#include <cmath>

namespace repro {

Adam::Adam(std::vector<Param*> params, const AdamConfig& config) : params_(std::move(params)), config_(config) {
  for (const Param* p : params_) {
    m_.emplace_back(p->size(), 0.0f);
    v_.emplace_back(p->size(), 0.0f);
  }
}

float Adam::learning_rate(int64_t step) const {
  if (step < config_.warmup_steps) return config_.lr * static_cast<float>(step + 1) / config_.warmup_steps;
  const double span = std::max<int64_t>(1, config_.total_steps - config_.warmup_steps);
  const double progress = std::min(1.0, static_cast<double>(step - config_.warmup_steps) / span);
  const double cosine = 0.5 * (1.0 + std::cos(3.141592653589793 * progress));
  return static_cast<float>(config_.lr * (config_.final_fraction + (1.0 - config_.final_fraction) * cosine));
}

double Adam::step(int64_t step) {
  double sum_squares = 0.0;
  for (const Param* p : params_)
    for (float g : p->grad) sum_squares += static_cast<double>(g) * g;
  const double norm = std::sqrt(sum_squares);
  if (!std::isfinite(norm)) return norm;
  const float clip =
      (config_.clip_norm > 0.0f && norm > config_.clip_norm) ? static_cast<float>(config_.clip_norm / norm) : 1.0f;

  const float lr = learning_rate(step);
  const double t = static_cast<double>(step + 1);
  const float correction1 = static_cast<float>(1.0 - std::pow(config_.beta1, t));
  const float correction2 = static_cast<float>(1.0 - std::pow(config_.beta2, t));
  for (size_t i = 0; i < params_.size(); ++i) {
    Param& p = *params_[i];
    float* m = m_[i].data();
    float* v = v_[i].data();
    const float decay = p.decay ? lr * config_.weight_decay : 0.0f;
    for (int64_t j = 0; j < p.size(); ++j) {
      const float g = p.grad[j] * clip;
      m[j] = config_.beta1 * m[j] + (1.0f - config_.beta1) * g;
      v[j] = config_.beta2 * v[j] + (1.0f - config_.beta2) * g * g;
      const float m_hat = m[j] / correction1;
      const float v_hat = v[j] / correction2;
      p.value[j] -= lr * m_hat / (std::sqrt(v_hat) + config_.eps) + decay * p.value[j];
    }
  }
  return norm;
}

}  // namespace repro
