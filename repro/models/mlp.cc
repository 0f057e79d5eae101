#include "models/mlp.h"

#include <algorithm>
#include <cmath>

#include "common/blas.h"
#include "common/ops.h"

namespace repro {

Mlp::Mlp(const MlpConfig& c, const NormConfig& norm, uint64_t seed, NormClock* clock)
    : config_(c),
      w_1_("w_1", int64_t{c.inputs} * c.hidden),
      w_2_("w_2", int64_t{c.hidden} * c.hidden),
      w_3_("w_3", int64_t{c.hidden} * c.classes),
      b_3_("b_3", c.classes, false),
      n_1_("n_1", c.hidden, norm, clock),
      n_2_("n_2", c.hidden, norm, clock) {
  Rng rng(seed);
  w_1_.init_normal(rng, std::sqrt(2.0 / c.inputs));  // He initialization for ReLU layers
  w_2_.init_normal(rng, std::sqrt(2.0 / c.hidden));
  w_3_.init_normal(rng, std::sqrt(1.0 / c.hidden));
  const int64_t B = c.batch, H = c.hidden;
  labels_.resize(B);
  for (auto* v : {&a_1_, &h_1_, &a_2_, &h_2_, &dh_, &da_}) v->resize(B * H);
  for (auto* v : {&mean_1_, &rstd_1_, &mean_2_, &rstd_2_}) v->resize(B);
  probs_.resize(B * c.classes);
  dlogits_.resize(B * c.classes);
}

std::vector<Param*> Mlp::params() {
  std::vector<Param*> p = {&w_1_, &w_2_, &w_3_, &b_3_};
  n_1_.collect(p);
  n_2_.collect(p);
  return p;
}

double Mlp::forward(const float* x, const int32_t* labels, int64_t rows, int64_t* errors) {
  const int I = config_.inputs, H = config_.hidden, K = config_.classes;
  rows_ = rows;
  x_ = x;
  std::copy(labels, labels + rows, labels_.begin());
  matmul(x, w_1_.data(), a_1_.data(), rows, I, H);
  n_1_.forward(a_1_.data(), h_1_.data(), mean_1_.data(), rstd_1_.data(), rows);
  relu_forward(h_1_.data(), h_1_.data(), rows * H);
  matmul(h_1_.data(), w_2_.data(), a_2_.data(), rows, H, H);
  n_2_.forward(a_2_.data(), h_2_.data(), mean_2_.data(), rstd_2_.data(), rows);
  relu_forward(h_2_.data(), h_2_.data(), rows * H);
  float* logits = probs_.data();
  matmul(h_2_.data(), w_3_.data(), logits, rows, H, K);
  add_bias(logits, b_3_.data(), rows, K);
  if (errors != nullptr) *errors = count_errors(logits, labels, rows, K);
  return softmax_cross_entropy(logits, labels, probs_.data(), nullptr, 0.0f, rows, K) / static_cast<double>(rows);
}

void Mlp::backward() {
  const int I = config_.inputs, H = config_.hidden, K = config_.classes;
  const int64_t rows = rows_;
  for (Param* p : params()) p->zero_grad();
  const float scale = 1.0f / static_cast<float>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int k = 0; k < K; ++k) dlogits_[r * K + k] = probs_[r * K + k] * scale;
    dlogits_[r * K + labels_[r]] -= scale;
  }
  gemm(true, false, H, K, rows, 1.0f, h_2_.data(), H, dlogits_.data(), K, 0.0f, w_3_.grad.data(), K);
  accumulate_bias_grad(dlogits_.data(), b_3_.grad.data(), rows, K);
  gemm(false, true, rows, H, K, 1.0f, dlogits_.data(), K, w_3_.data(), K, 0.0f, dh_.data(), H);

  relu_backward(h_2_.data(), dh_.data(), dh_.data(), rows * H);
  n_2_.backward(dh_.data(), a_2_.data(), mean_2_.data(), rstd_2_.data(), da_.data(), rows);
  gemm(true, false, H, H, rows, 1.0f, h_1_.data(), H, da_.data(), H, 0.0f, w_2_.grad.data(), H);
  gemm(false, true, rows, H, H, 1.0f, da_.data(), H, w_2_.data(), H, 0.0f, dh_.data(), H);

  relu_backward(h_1_.data(), dh_.data(), dh_.data(), rows * H);
  n_1_.backward(dh_.data(), a_1_.data(), mean_1_.data(), rstd_1_.data(), da_.data(), rows);
  gemm(true, false, I, H, rows, 1.0f, x_, I, da_.data(), H, 0.0f, w_1_.grad.data(), H);
}

}  // namespace repro
