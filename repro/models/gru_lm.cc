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
      w_xg_("w_xg", int64_t{c.embed} * 2 * c.hidden),
      w_xc_("w_xc", int64_t{c.embed} * c.hidden),
      u_g_("u_g", int64_t{c.hidden} * 2 * c.hidden),
      u_c_("u_c", int64_t{c.hidden} * c.hidden),
      w_out_("w_out", int64_t{c.hidden} * c.vocab),
      b_out_("b_out", c.vocab, /*decays=*/false),
      n_xg_("n_xg", 2 * c.hidden, norm, clock),
      n_xc_("n_xc", c.hidden, norm, clock),
      n_hg_("n_hg", 2 * c.hidden, norm, clock),
      n_hc_("n_hc", c.hidden, norm, clock) {
  Rng rng(seed);
  const double e = c.embed, h = c.hidden;
  embedding_.init_normal(rng, 1.0);
  w_xg_.init_normal(rng, 1.0 / std::sqrt(e));
  w_xc_.init_normal(rng, 1.0 / std::sqrt(e));
  u_g_.init_normal(rng, 1.0 / std::sqrt(h));
  u_c_.init_normal(rng, 1.0 / std::sqrt(h));
  w_out_.init_normal(rng, 1.0 / std::sqrt(h));

  const int64_t n = rows_, H = c.hidden;
  inputs_.resize(n);
  targets_.resize(n);
  x_.resize(n * c.embed);
  for (auto* v : {&xg_, &xg_n_, &hg_, &hg_n_, &gates_, &dxg_n_, &dxg_, &dhg_}) v->resize(n * 2 * H);
  for (auto* v : {&xc_, &xc_n_, &hc_, &hc_n_, &cand_, &dxc_n_, &dxc_, &dhc_, &dh_out_}) v->resize(n * H);
  dhg_n_.resize(int64_t{c.batch} * 2 * H);
  dhc_n_.resize(int64_t{c.batch} * H);
  for (auto* v : {&mean_xg_, &rstd_xg_, &mean_xc_, &rstd_xc_, &mean_hg_, &rstd_hg_, &mean_hc_, &rstd_hc_})
    v->resize(n);
  h_.assign((n + c.batch) * H, 0.0f);
  probs_.resize(n * c.vocab);
  dlogits_.resize(n * c.vocab);
  dh_.resize(int64_t{c.batch} * H);
  dx_.resize(n * c.embed);
}

std::vector<Param*> GruLm::params() {
  std::vector<Param*> p = {&embedding_, &w_xg_, &w_xc_, &u_g_, &u_c_, &w_out_, &b_out_};
  for (NormLayer* n : {&n_xg_, &n_xc_, &n_hg_, &n_hc_}) n->collect(p);
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

  // The input side of every step at once: one product and one norm call over all T * B rows.
  matmul(x_.data(), w_xg_.data(), xg_.data(), rows_, E, 2 * H);
  matmul(x_.data(), w_xc_.data(), xc_.data(), rows_, E, H);
  n_xg_.forward(xg_.data(), xg_n_.data(), mean_xg_.data(), rstd_xg_.data(), rows_);
  n_xc_.forward(xc_.data(), xc_n_.data(), mean_xc_.data(), rstd_xc_.data(), rows_);

  for (int t = 0; t < T; ++t) {
    const int64_t at = int64_t{t} * B;  // first row of this step
    const float* h_prev = &h_[at * H];
    float* h_next = &h_[(at + B) * H];
    matmul(h_prev, u_g_.data(), &hg_[at * 2 * H], B, H, 2 * H);
    matmul(h_prev, u_c_.data(), &hc_[at * H], B, H, H);
    n_hg_.forward(&hg_[at * 2 * H], &hg_n_[at * 2 * H], &mean_hg_[at], &rstd_hg_[at], B);
    n_hc_.forward(&hc_[at * H], &hc_n_[at * H], &mean_hc_[at], &rstd_hc_[at], B);
    for (int b = 0; b < B; ++b) {
      const int64_t row = at + b;
      const float* xg = &xg_n_[row * 2 * H];
      const float* hg = &hg_n_[row * 2 * H];
      const float* xc = &xc_n_[row * H];
      const float* hc = &hc_n_[row * H];
      float* gates = &gates_[row * 2 * H];
      float* cand = &cand_[row * H];
      for (int j = 0; j < 2 * H; ++j) gates[j] = sigmoid(xg[j] + hg[j]);
      for (int j = 0; j < H; ++j) {
        const float r = gates[j], z = gates[H + j];
        cand[j] = tanh_via_exp(xc[j] + r * hc[j]);
        h_next[b * H + j] = z * h_prev[b * H + j] + (1.0f - z) * cand[j];
      }
    }
  }

  float* logits = probs_.data();  // softmax runs in place
  matmul(&h_[int64_t{B} * H], w_out_.data(), logits, rows_, H, V);
  add_bias(logits, b_out_.data(), rows_, V);
  const double loss = softmax_cross_entropy(logits, targets_.data(), probs_.data(), nullptr, 0.0f, rows_, V);
  return loss / static_cast<double>(rows_);
}

void GruLm::backward() {
  const int B = config_.batch, T = config_.seq_len, H = config_.hidden, E = config_.embed, V = config_.vocab;
  for (Param* p : params()) p->zero_grad();

  // Output layer: d(mean loss)/d logits = (probs - onehot) / (T * B).
  const float scale = 1.0f / static_cast<float>(rows_);
  for (int64_t r = 0; r < rows_; ++r) {
    for (int v = 0; v < V; ++v) dlogits_[r * V + v] = probs_[r * V + v] * scale;
    dlogits_[r * V + targets_[r]] -= scale;
  }
  const float* h_out = &h_[int64_t{B} * H];  // (T * B, H): the states the output layer read
  gemm(true, false, H, V, rows_, 1.0f, h_out, H, dlogits_.data(), V, 0.0f, w_out_.grad.data(), V);
  accumulate_bias_grad(dlogits_.data(), b_out_.grad.data(), rows_, V);
  gemm(false, true, rows_, H, V, 1.0f, dlogits_.data(), V, w_out_.data(), V, 0.0f, dh_out_.data(), H);

  // Back through time. dh_ holds dL/dh_t for the step being undone, from later steps.
  std::fill(dh_.begin(), dh_.end(), 0.0f);
  for (int t = T - 1; t >= 0; --t) {
    const int64_t at = int64_t{t} * B;
    const float* h_prev = &h_[at * H];
    for (int b = 0; b < B; ++b) {
      const int64_t row = at + b;
      const float* gates = &gates_[row * 2 * H];
      const float* cand = &cand_[row * H];
      const float* hc = &hc_n_[row * H];
      float* dxg = &dxg_n_[row * 2 * H];
      float* dhg = &dhg_n_[int64_t{b} * 2 * H];
      float* dxc = &dxc_n_[row * H];
      float* dhc = &dhc_n_[int64_t{b} * H];
      float* dh = &dh_[b * H];
      for (int j = 0; j < H; ++j) {
        const float r = gates[j], z = gates[H + j], c = cand[j], hp = h_prev[b * H + j];
        const float d = dh[j] + dh_out_[row * H + j];
        const float dc_pre = d * (1.0f - z) * (1.0f - c * c);  // through h' = z h + (1 - z) c, then tanh
        const float dz_pre = d * (hp - c) * z * (1.0f - z);
        const float dr_pre = dc_pre * hc[j] * r * (1.0f - r);
        dxc[j] = dc_pre;
        dhc[j] = dc_pre * r;
        dxg[j] = dr_pre;
        dxg[H + j] = dz_pre;
        dhg[j] = dr_pre;
        dhg[H + j] = dz_pre;
        dh[j] = d * z;  // the direct path to h_{t-1}; the products through U_g and U_c are added below
      }
    }
    // Through the hidden-side norms, then the products with h_{t-1}.
    n_hg_.backward(dhg_n_.data(), &hg_[at * 2 * H], &mean_hg_[at], &rstd_hg_[at], &dhg_[at * 2 * H], B);
    n_hc_.backward(dhc_n_.data(), &hc_[at * H], &mean_hc_[at], &rstd_hc_[at], &dhc_[at * H], B);
    if (t > 0) {  // h_0 is the constant zero state: nothing flows into it
      gemm(false, true, B, H, 2 * H, 1.0f, &dhg_[at * 2 * H], 2 * H, u_g_.data(), 2 * H, 1.0f, dh_.data(), H);
      gemm(false, true, B, H, H, 1.0f, &dhc_[at * H], H, u_c_.data(), H, 1.0f, dh_.data(), H);
    }
  }
  // dU = sum_t h_{t-1}^T dpre_t: one product over all steps. h_ rows 0 .. T*B-1 are the h_{t-1}.
  gemm(true, false, H, 2 * H, rows_, 1.0f, h_.data(), H, dhg_.data(), 2 * H, 0.0f, u_g_.grad.data(), 2 * H);
  gemm(true, false, H, H, rows_, 1.0f, h_.data(), H, dhc_.data(), H, 0.0f, u_c_.grad.data(), H);

  // The input side, all steps at once.
  n_xg_.backward(dxg_n_.data(), xg_.data(), mean_xg_.data(), rstd_xg_.data(), dxg_.data(), rows_);
  n_xc_.backward(dxc_n_.data(), xc_.data(), mean_xc_.data(), rstd_xc_.data(), dxc_.data(), rows_);
  gemm(true, false, E, 2 * H, rows_, 1.0f, x_.data(), E, dxg_.data(), 2 * H, 0.0f, w_xg_.grad.data(), 2 * H);
  gemm(true, false, E, H, rows_, 1.0f, x_.data(), E, dxc_.data(), H, 0.0f, w_xc_.grad.data(), H);
  gemm(false, true, rows_, E, 2 * H, 1.0f, dxg_.data(), 2 * H, w_xg_.data(), 2 * H, 0.0f, dx_.data(), E);
  gemm(false, true, rows_, E, H, 1.0f, dxc_.data(), H, w_xc_.data(), H, 1.0f, dx_.data(), E);
  for (int64_t r = 0; r < rows_; ++r) {
    float* de = &embedding_.grad[int64_t{inputs_[r]} * E];
    for (int i = 0; i < E; ++i) de[i] += dx_[r * E + i];
  }
}

}  // namespace repro
