#include "models/gru_lm.h"

#include <cmath>
#include <cstring>

#include "common/blas.h"
#include "common/ops.h"

namespace repro {

GruLm::GruLm(const GruLmConfig& c, const NormConfig& norm, uint64_t seed, NormClock* clock)
    : config_(c),
      rows_(int64_t{c.seq_len} * c.batch),
      embedding_("embedding", int64_t{c.vocab} * c.embed),
      gru_("gru", c.embed, c.hidden, c.seq_len, c.batch, /*reverse=*/false, norm, clock),
      w_out_("w_out", int64_t{c.hidden} * c.vocab),
      b_out_("b_out", c.vocab, /*decays=*/false) {
  Rng rng(seed);
  embedding_.init_normal(rng, 1.0);
  gru_.init(rng);
  w_out_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(c.hidden)));

  const int64_t n = rows_;
  inputs_.resize(n);
  targets_.resize(n);
  x_.resize(n * c.embed);
  dh_out_.resize(n * c.hidden);
  probs_.resize(n * c.vocab);
  dlogits_.resize(n * c.vocab);
  dx_.resize(n * c.embed);
}

std::vector<Param*> GruLm::params() {
  std::vector<Param*> p = {&embedding_};
  gru_.collect_weights(p);
  p.push_back(&w_out_);
  p.push_back(&b_out_);
  gru_.collect_norms(p);
  return p;
}

double GruLm::forward(const int32_t* tokens) {
  const int B = config_.batch, T = config_.seq_len, H = config_.hidden, E = config_.embed, V = config_.vocab;
  for (int t = 0; t < T; ++t)
    for (int b = 0; b < B; ++b) {
      inputs_[t * B + b] = tokens[b * (T + 1) + t];
      targets_[t * B + b] = tokens[b * (T + 1) + t + 1];
    }
  for (int64_t r = 0; r < rows_; ++r)
    std::memcpy(&x_[r * E], &embedding_.value[int64_t{inputs_[r]} * E], E * sizeof(float));

  gru_.forward(x_.data(), /*active=*/nullptr, T, B);

  float* logits = probs_.data();  // softmax runs in place
  matmul(gru_.outputs(), w_out_.data(), logits, static_cast<int>(rows_), H, V);
  add_bias(logits, b_out_.data(), rows_, V);
  const double loss = softmax_cross_entropy(logits, targets_.data(), probs_.data(), nullptr, 0.0f, rows_, V);
  return loss / static_cast<double>(rows_);
}

void GruLm::backward() {
  const int H = config_.hidden, E = config_.embed, V = config_.vocab;
  for (Param* p : params()) p->zero_grad();

  // Output layer: d(mean loss)/d logits = (probs - onehot) / (T * B).
  const float scale = 1.0f / static_cast<float>(rows_);
  for (int64_t r = 0; r < rows_; ++r) {
    for (int v = 0; v < V; ++v) dlogits_[r * V + v] = probs_[r * V + v] * scale;
    dlogits_[r * V + targets_[r]] -= scale;
  }
  const int rows = static_cast<int>(rows_);
  gemm(true, false, H, V, rows, 1.0f, gru_.outputs(), H, dlogits_.data(), V, 0.0f, w_out_.grad.data(), V);
  accumulate_bias_grad(dlogits_.data(), b_out_.grad.data(), rows_, V);
  gemm(false, true, rows, H, V, 1.0f, dlogits_.data(), V, w_out_.data(), V, 0.0f, dh_out_.data(), H);

  gru_.backward(dh_out_.data(), dx_.data());
  for (int64_t r = 0; r < rows_; ++r) {
    float* de = &embedding_.grad[int64_t{inputs_[r]} * E];
    for (int i = 0; i < E; ++i) de[i] += dx_[r * E + i];
  }
}

}  // namespace repro
