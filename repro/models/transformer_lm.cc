#include "models/transformer_lm.h"

#include <cmath>
#include <cstring>
#include <string>

#include "common/blas.h"
#include "common/ops.h"

namespace repro {

TransformerLm::Layer::Layer(int index, const TransformerLmConfig& c, const NormConfig& norm, NormClock* clock)
    : w_qkv("layer" + std::to_string(index) + ".w_qkv", int64_t{c.channels} * 3 * c.channels),
      b_qkv("layer" + std::to_string(index) + ".b_qkv", 3 * c.channels, false),
      w_o("layer" + std::to_string(index) + ".w_o", int64_t{c.channels} * c.channels),
      b_o("layer" + std::to_string(index) + ".b_o", c.channels, false),
      w_fc("layer" + std::to_string(index) + ".w_fc", int64_t{c.channels} * 4 * c.channels),
      b_fc("layer" + std::to_string(index) + ".b_fc", 4 * c.channels, false),
      w_proj("layer" + std::to_string(index) + ".w_proj", int64_t{4} * c.channels * c.channels),
      b_proj("layer" + std::to_string(index) + ".b_proj", c.channels, false),
      n_1("layer" + std::to_string(index) + ".n_1", c.channels, norm, clock),
      n_2("layer" + std::to_string(index) + ".n_2", c.channels, norm, clock) {
  const int64_t n = int64_t{c.batch} * c.seq_len, C = c.channels;
  qkv.resize(n * 3 * C);
  att.resize(int64_t{c.batch} * c.heads * c.seq_len * c.seq_len);
  for (auto* v : {&att_out, &res_1, &x_1, &res_2, &out}) v->resize(n * C);
  fc.resize(n * 4 * C);
  fc_gelu.resize(n * 4 * C);
  for (auto* v : {&mean_1, &rstd_1, &mean_2, &rstd_2}) v->resize(n);
}

TransformerLm::TransformerLm(const TransformerLmConfig& c, const NormConfig& norm, uint64_t seed, NormClock* clock)
    : config_(c),
      rows_(int64_t{c.batch} * c.seq_len),
      tok_emb_("tok_emb", int64_t{c.vocab} * c.channels),
      pos_emb_("pos_emb", int64_t{c.seq_len} * c.channels),
      w_lm_("w_lm", int64_t{c.channels} * c.vocab),
      b_lm_("b_lm", c.vocab, false) {
  const int64_t C = c.channels;
  for (int l = 0; l < c.layers; ++l) layers_.push_back(std::make_unique<Layer>(l, c, norm, clock));
  // Weights ~ N(0, 1/fan_in): unit-scale activations, which a post-norm model without a norm needs too.
  Rng rng(seed);
  tok_emb_.init_normal(rng, 1.0);
  pos_emb_.init_normal(rng, 0.1);
  for (auto& layer : layers_) {
    layer->w_qkv.init_normal(rng, 1.0 / std::sqrt(C));
    layer->w_o.init_normal(rng, 1.0 / std::sqrt(C));
    layer->w_fc.init_normal(rng, 1.0 / std::sqrt(C));
    layer->w_proj.init_normal(rng, 1.0 / std::sqrt(4.0 * C));
  }
  w_lm_.init_normal(rng, 1.0 / std::sqrt(C));

  inputs_.resize(rows_);
  targets_.resize(rows_);
  x_0_.resize(rows_ * C);
  probs_.resize(rows_ * c.vocab);
  dlogits_.resize(rows_ * c.vocab);
  for (auto* v : {&dx_, &dres_, &dtmp_}) v->resize(rows_ * C);
  dfc_.resize(rows_ * 4 * C);
  dqkv_.resize(rows_ * 3 * C);
  datt_.resize(int64_t{c.seq_len} * c.seq_len);
}

std::vector<Param*> TransformerLm::params() {
  std::vector<Param*> p = {&tok_emb_, &pos_emb_};
  for (auto& l : layers_) {
    for (Param* q : {&l->w_qkv, &l->b_qkv, &l->w_o, &l->b_o, &l->w_fc, &l->b_fc, &l->w_proj, &l->b_proj})
      p.push_back(q);
    l->n_1.collect(p);
    l->n_2.collect(p);
  }
  p.push_back(&w_lm_);
  p.push_back(&b_lm_);
  return p;
}

void TransformerLm::attention_forward(Layer& layer) {
  const int B = config_.batch, T = config_.seq_len, C = config_.channels, NH = config_.heads, D = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const float* q = &layer.qkv[int64_t{b} * T * 3 * C + h * D];  // (T, D), leading dimension 3C
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* att = &layer.att[(int64_t{b} * NH + h) * T * T];  // (T, T)
      gemm(false, true, T, T, D, scale, q, 3 * C, k, 3 * C, 0.0f, att, T);
      for (int i = 0; i < T; ++i) {  // causal softmax over j <= i
        float* row = att + int64_t{i} * T;
        float m = row[0];
        for (int j = 1; j <= i; ++j) m = std::fmax(m, row[j]);
        float sum = 0.0f;
        for (int j = 0; j <= i; ++j) sum += row[j] = std::exp(row[j] - m);
        const float inv = 1.0f / sum;
        for (int j = 0; j <= i; ++j) row[j] *= inv;
        for (int j = i + 1; j < T; ++j) row[j] = 0.0f;
      }
      gemm(false, false, T, D, T, 1.0f, att, T, v, 3 * C, 0.0f, &layer.att_out[int64_t{b} * T * C + h * D], C);
    }
}

double TransformerLm::forward(const int32_t* tokens) {
  const int B = config_.batch, T = config_.seq_len, C = config_.channels, V = config_.vocab;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const int64_t row = int64_t{b} * T + t;
      inputs_[row] = tokens[b * (T + 1) + t];
      targets_[row] = tokens[b * (T + 1) + t + 1];
      for (int i = 0; i < C; ++i)
        x_0_[row * C + i] = tok_emb_.value[int64_t{inputs_[row]} * C + i] + pos_emb_.value[int64_t{t} * C + i];
    }
  const float* x = x_0_.data();
  for (auto& lp : layers_) {
    Layer& l = *lp;
    matmul(x, l.w_qkv.data(), l.qkv.data(), rows_, C, 3 * C);
    add_bias(l.qkv.data(), l.b_qkv.data(), rows_, 3 * C);
    attention_forward(l);
    matmul(l.att_out.data(), l.w_o.data(), l.res_1.data(), rows_, C, C);
    for (int64_t r = 0; r < rows_; ++r)
      for (int i = 0; i < C; ++i) l.res_1[r * C + i] += x[r * C + i] + l.b_o.value[i];
    l.n_1.forward(l.res_1.data(), l.x_1.data(), l.mean_1.data(), l.rstd_1.data(), rows_);

    matmul(l.x_1.data(), l.w_fc.data(), l.fc.data(), rows_, C, 4 * C);
    add_bias(l.fc.data(), l.b_fc.data(), rows_, 4 * C);
    gelu_forward(l.fc.data(), l.fc_gelu.data(), rows_ * 4 * C);
    matmul(l.fc_gelu.data(), l.w_proj.data(), l.res_2.data(), rows_, 4 * C, C);
    for (int64_t r = 0; r < rows_; ++r)
      for (int i = 0; i < C; ++i) l.res_2[r * C + i] += l.x_1[r * C + i] + l.b_proj.value[i];
    l.n_2.forward(l.res_2.data(), l.out.data(), l.mean_2.data(), l.rstd_2.data(), rows_);
    x = l.out.data();
  }
  float* logits = probs_.data();  // softmax runs in place
  matmul(x, w_lm_.data(), logits, rows_, C, V);
  add_bias(logits, b_lm_.data(), rows_, V);
  return softmax_cross_entropy(logits, targets_.data(), probs_.data(), nullptr, 0.0f, rows_, V) /
         static_cast<double>(rows_);
}

void TransformerLm::attention_backward(Layer& layer, const float* d_att_out, float* d_qkv) {
  const int B = config_.batch, T = config_.seq_len, C = config_.channels, NH = config_.heads, D = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const int64_t base = int64_t{b} * T * 3 * C + h * D;
      const float* q = &layer.qkv[base];
      const float* k = q + C;
      const float* v = q + 2 * C;
      float* dq = d_qkv + base;
      float* dk = dq + C;
      float* dv = dq + 2 * C;
      const float* att = &layer.att[(int64_t{b} * NH + h) * T * T];
      const float* dout = d_att_out + int64_t{b} * T * C + h * D;  // (T, D), leading dimension C
      float* datt = datt_.data();
      // out = att v:  d att = d out v^T,  d v = att^T d out.
      gemm(false, true, T, T, D, 1.0f, dout, C, v, 3 * C, 0.0f, datt, T);
      gemm(true, false, T, D, T, 1.0f, att, T, dout, C, 0.0f, dv, 3 * C);
      // Through the softmax: d s_ij = p_ij (d p_ij - sum_j' p_ij' d p_ij'); zero above the diagonal.
      for (int i = 0; i < T; ++i) {
        const float* p = att + int64_t{i} * T;
        float* d = datt + int64_t{i} * T;
        float dot = 0.0f;
        for (int j = 0; j <= i; ++j) dot += p[j] * d[j];
        for (int j = 0; j <= i; ++j) d[j] = p[j] * (d[j] - dot);
        for (int j = i + 1; j < T; ++j) d[j] = 0.0f;
      }
      // s = scale q k^T:  d q = scale ds k,  d k = scale ds^T q.
      gemm(false, false, T, D, T, scale, datt, T, k, 3 * C, 0.0f, dq, 3 * C);
      gemm(true, false, T, D, T, scale, datt, T, q, 3 * C, 0.0f, dk, 3 * C);
    }
}

void TransformerLm::backward() {
  const int T = config_.seq_len, C = config_.channels, V = config_.vocab, L = config_.layers;
  for (Param* p : params()) p->zero_grad();

  const float scale = 1.0f / static_cast<float>(rows_);
  for (int64_t r = 0; r < rows_; ++r) {
    for (int v = 0; v < V; ++v) dlogits_[r * V + v] = probs_[r * V + v] * scale;
    dlogits_[r * V + targets_[r]] -= scale;
  }
  const float* x_last = layers_.back()->out.data();
  gemm(true, false, C, V, rows_, 1.0f, x_last, C, dlogits_.data(), V, 0.0f, w_lm_.grad.data(), V);
  accumulate_bias_grad(dlogits_.data(), b_lm_.grad.data(), rows_, V);
  gemm(false, true, rows_, C, V, 1.0f, dlogits_.data(), V, w_lm_.data(), V, 0.0f, dx_.data(), C);  // d out

  for (int li = L - 1; li >= 0; --li) {
    Layer& l = *layers_[li];
    const float* x_in = li == 0 ? x_0_.data() : layers_[li - 1]->out.data();
    // out = N_2(res_2), res_2 = x_1 + fc_gelu W_proj + b_proj.
    l.n_2.backward(dx_.data(), l.res_2.data(), l.mean_2.data(), l.rstd_2.data(), dres_.data(), rows_);
    gemm(true, false, 4 * C, C, rows_, 1.0f, l.fc_gelu.data(), 4 * C, dres_.data(), C, 0.0f, l.w_proj.grad.data(), C);
    accumulate_bias_grad(dres_.data(), l.b_proj.grad.data(), rows_, C);
    gemm(false, true, rows_, 4 * C, C, 1.0f, dres_.data(), C, l.w_proj.data(), C, 0.0f, dfc_.data(), 4 * C);
    gelu_backward(l.fc.data(), dfc_.data(), dfc_.data(), rows_ * 4 * C);
    gemm(true, false, C, 4 * C, rows_, 1.0f, l.x_1.data(), C, dfc_.data(), 4 * C, 0.0f, l.w_fc.grad.data(), 4 * C);
    accumulate_bias_grad(dfc_.data(), l.b_fc.grad.data(), rows_, 4 * C);
    // d x_1 = d res_2 (residual) + d fc W_fc^T.
    std::memcpy(dtmp_.data(), dres_.data(), dres_.size() * sizeof(float));
    gemm(false, true, rows_, C, 4 * C, 1.0f, dfc_.data(), 4 * C, l.w_fc.data(), 4 * C, 1.0f, dtmp_.data(), C);

    // x_1 = N_1(res_1), res_1 = x_in + att_out W_o + b_o.
    l.n_1.backward(dtmp_.data(), l.res_1.data(), l.mean_1.data(), l.rstd_1.data(), dres_.data(), rows_);
    gemm(true, false, C, C, rows_, 1.0f, l.att_out.data(), C, dres_.data(), C, 0.0f, l.w_o.grad.data(), C);
    accumulate_bias_grad(dres_.data(), l.b_o.grad.data(), rows_, C);
    gemm(false, true, rows_, C, C, 1.0f, dres_.data(), C, l.w_o.data(), C, 0.0f, dtmp_.data(), C);  // d att_out
    attention_backward(l, dtmp_.data(), dqkv_.data());
    gemm(true, false, C, 3 * C, rows_, 1.0f, x_in, C, dqkv_.data(), 3 * C, 0.0f, l.w_qkv.grad.data(), 3 * C);
    accumulate_bias_grad(dqkv_.data(), l.b_qkv.grad.data(), rows_, 3 * C);
    // d x_in = d res_1 (residual) + d qkv W_qkv^T: the next (lower) layer's d out.
    std::memcpy(dx_.data(), dres_.data(), dres_.size() * sizeof(float));
    gemm(false, true, rows_, C, 3 * C, 1.0f, dqkv_.data(), 3 * C, l.w_qkv.data(), 3 * C, 1.0f, dx_.data(), C);
  }
  for (int64_t r = 0; r < rows_; ++r) {
    const int t = static_cast<int>(r % T);
    for (int i = 0; i < C; ++i) {
      tok_emb_.grad[int64_t{inputs_[r]} * C + i] += dx_[r * C + i];
      pos_emb_.grad[int64_t{t} * C + i] += dx_[r * C + i];
    }
  }
}

}  // namespace repro
