#include "models/rnnsearch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "common/blas.h"
#include "common/ops.h"
#include "models/gru_cell.h"

namespace repro {

TranslationBatch make_translation_batch(const std::vector<const std::vector<int32_t>*>& sources,
                                        const std::vector<const std::vector<int32_t>*>& targets) {
  TranslationBatch batch;
  const int B = static_cast<int>(sources.size());
  batch.batch = B;
  for (int b = 0; b < B; ++b) {
    batch.source_steps = std::max(batch.source_steps, static_cast<int>(sources[b]->size()));
    if (!targets.empty()) batch.target_steps = std::max(batch.target_steps, static_cast<int>(targets[b]->size()) + 1);
  }
  const int S = batch.source_steps, T = batch.target_steps;
  batch.source.assign(static_cast<size_t>(S) * B, kEndToken);
  batch.source_active.assign(batch.source.size(), 0);
  batch.target_in.assign(static_cast<size_t>(T) * B, kEndToken);
  batch.target_out.assign(batch.target_in.size(), -1);
  for (int b = 0; b < B; ++b) {
    const std::vector<int32_t>& source = *sources[b];
    for (size_t t = 0; t < source.size(); ++t) {
      batch.source[t * B + b] = source[t];
      batch.source_active[t * B + b] = 1;
    }
    if (targets.empty()) continue;
    const std::vector<int32_t>& target = *targets[b];
    for (size_t t = 0; t <= target.size(); ++t) {
      batch.target_in[t * B + b] = t == 0 ? kStartToken : target[t - 1];
      batch.target_out[t * B + b] = t < target.size() ? target[t] : kEndToken;
    }
  }
  return batch;
}

RnnSearch::RnnSearch(const RnnSearchConfig& c, const NormConfig& norm, uint64_t seed, NormClock* clock)
    : config_(c),
      A_(2 * c.encoder_hidden),
      source_embedding_("source_embedding", int64_t{c.vocab} * c.embed),
      target_embedding_("target_embedding", int64_t{c.vocab} * c.embed),
      encoder_forward_("encoder_forward", c.embed, c.encoder_hidden, c.max_source, c.batch, /*reverse=*/false, norm,
                       clock),
      encoder_backward_("encoder_backward", c.embed, c.encoder_hidden, c.max_source, c.batch, /*reverse=*/true, norm,
                        clock),
      w_q_("w_q", int64_t{c.decoder_hidden} * 2 * c.encoder_hidden),
      w_xg_("w_xg", int64_t{c.embed + 2 * c.encoder_hidden} * 2 * c.decoder_hidden),
      w_xc_("w_xc", int64_t{c.embed + 2 * c.encoder_hidden} * c.decoder_hidden),
      u_g_("u_g", int64_t{c.decoder_hidden} * 2 * c.decoder_hidden),
      u_c_("u_c", int64_t{c.decoder_hidden} * c.decoder_hidden),
      w_out_("w_out", int64_t{c.decoder_hidden + 2 * c.encoder_hidden} * c.vocab),
      b_out_("b_out", c.vocab, /*decays=*/false),
      n_xg_("n_xg", 2 * c.decoder_hidden, norm, clock),
      n_xc_("n_xc", c.decoder_hidden, norm, clock),
      n_hg_("n_hg", 2 * c.decoder_hidden, norm, clock),
      n_hc_("n_hc", c.decoder_hidden, norm, clock) {
  const int E = c.embed, H = c.encoder_hidden, A = A_, D = c.decoder_hidden, B = c.batch;
  Rng rng(seed);
  source_embedding_.init_normal(rng, 1.0);
  target_embedding_.init_normal(rng, 1.0);
  encoder_forward_.init(rng);
  encoder_backward_.init(rng);
  w_q_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(D)));
  w_xg_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(E + A)));
  w_xc_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(E + A)));
  u_g_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(D)));
  u_c_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(D)));
  w_out_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(D + A)));

  const int64_t src = int64_t{c.max_source} * B, tgt = int64_t{c.max_target} * B;
  source_x_.resize(src * E);
  source_active_.resize(src);
  source_tokens_.resize(src);
  annotations_.resize(src * A);
  dannotations_.resize(src * A);
  dforward_.resize(src * H);
  dbackward_.resize(src * H);
  dsource_x_.resize(src * E);
  dsource_x2_.resize(src * E);
  prev_tokens_.resize(tgt);
  for (auto* v : {&q_, &ctx_, &dq_}) v->resize(tgt * A);
  alpha_.resize(tgt * c.max_source);
  dec_x_.resize(tgt * (E + A));
  for (auto* v : {&xg_, &xg_n_, &hg_, &hg_n_, &gates_, &dgates_, &dxg_, &dhg_}) v->resize(tgt * 2 * D);
  for (auto* v : {&xc_, &xc_n_, &hc_, &hc_n_, &cand_, &dxc_n_, &dxc_, &dhc_}) v->resize(tgt * D);
  for (auto* v : {&mean_xg_, &rstd_xg_, &mean_xc_, &rstd_xc_, &mean_hg_, &rstd_hg_, &mean_hc_, &rstd_hc_}) v->resize(tgt);
  states_.assign((tgt + B) * D, 0.0f);
  features_.resize(tgt * (D + A));
  dfeatures_.resize(tgt * (D + A));
  for (auto* v : {&dhc_n_, &ds_, &ds_next_}) v->resize(int64_t{B} * D);
  ddec_x_.resize(int64_t{B} * (E + A));
  dctx_.resize(int64_t{B} * A);
  dalpha_.resize(c.max_source);
}

std::vector<Param*> RnnSearch::params() {
  std::vector<Param*> p = {&source_embedding_, &target_embedding_};
  encoder_forward_.collect_weights(p);
  encoder_backward_.collect_weights(p);
  for (Param* q : {&w_q_, &w_xg_, &w_xc_, &u_g_, &u_c_, &w_out_, &b_out_}) p.push_back(q);
  encoder_forward_.collect_norms(p);
  encoder_backward_.collect_norms(p);
  for (NormLayer* n : {&n_xg_, &n_xc_, &n_hg_, &n_hc_}) n->collect(p);
  return p;
}

void RnnSearch::encode(const TranslationBatch& batch) {
  const int B = batch.batch, S = batch.source_steps, E = config_.embed, H = config_.encoder_hidden, A = A_;
  if (B > config_.batch || S > config_.max_source || batch.target_steps > config_.max_target)
    throw std::invalid_argument("RnnSearch: batch larger than the model's buffers");
  batch_ = B, source_steps_ = S;
  const int64_t rows = int64_t{S} * B;
  std::copy(batch.source.begin(), batch.source.begin() + rows, source_tokens_.begin());
  std::copy(batch.source_active.begin(), batch.source_active.begin() + rows, source_active_.begin());
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(&source_x_[r * E], &source_embedding_.value[int64_t{source_tokens_[r]} * E], E * sizeof(float));
  encoder_forward_.forward(source_x_.data(), source_active_.data(), S, B);
  encoder_backward_.forward(source_x_.data(), source_active_.data(), S, B);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(&annotations_[r * A], encoder_forward_.outputs() + r * H, H * sizeof(float));
    std::memcpy(&annotations_[r * A + H], encoder_backward_.outputs() + r * H, H * sizeof(float));
  }
}

void RnnSearch::decoder_step(int i, const int32_t* prev) {
  const int B = batch_, S = source_steps_, E = config_.embed, A = A_, D = config_.decoder_hidden;
  const int smax = config_.max_source;
  const int64_t at = int64_t{i} * B;
  const float* s_prev = &states_[at * D];
  float* s_next = &states_[(at + B) * D];

  // Attention from s_{i-1}: bilinear scores over the real source positions, softmax, context.
  matmul(s_prev, w_q_.data(), &q_[at * A], B, D, A);
  for (int b = 0; b < B; ++b) {
    const float* q = &q_[(at + b) * A];
    float* alpha = &alpha_[(at + b) * smax];
    float best = -std::numeric_limits<float>::infinity();
    for (int j = 0; j < S; ++j) {
      if (!source_active_[int64_t{j} * B + b]) continue;
      const float* a = &annotations_[(int64_t{j} * B + b) * A];
      float score = 0.0f;
      for (int k = 0; k < A; ++k) score += a[k] * q[k];
      alpha[j] = score;
      best = std::max(best, score);
    }
    double sum = 0.0;
    for (int j = 0; j < S; ++j) {
      if (!source_active_[int64_t{j} * B + b]) {
        alpha[j] = 0.0f;
        continue;
      }
      alpha[j] = std::exp(alpha[j] - best);
      sum += alpha[j];
    }
    const float inv = sum > 0.0 ? static_cast<float>(1.0 / sum) : 0.0f;
    float* ctx = &ctx_[(at + b) * A];
    std::fill(ctx, ctx + A, 0.0f);
    for (int j = 0; j < S; ++j) {
      alpha[j] *= inv;
      const float* a = &annotations_[(int64_t{j} * B + b) * A];
      for (int k = 0; k < A; ++k) ctx[k] += alpha[j] * a[k];
    }
    // The GRU's input [e(y_{i-1}) ; c_i].
    prev_tokens_[at + b] = prev[b];
    float* x = &dec_x_[(at + b) * (E + A)];
    std::memcpy(x, &target_embedding_.value[int64_t{prev[b]} * E], E * sizeof(float));
    std::memcpy(x + E, ctx, A * sizeof(float));
  }

  // The GRU step: both sides' products and norms for this step's B rows, then the cell.
  const float* x = &dec_x_[at * (E + A)];
  matmul(x, w_xg_.data(), &xg_[at * 2 * D], B, E + A, 2 * D);
  matmul(x, w_xc_.data(), &xc_[at * D], B, E + A, D);
  matmul(s_prev, u_g_.data(), &hg_[at * 2 * D], B, D, 2 * D);
  matmul(s_prev, u_c_.data(), &hc_[at * D], B, D, D);
  n_xg_.forward(&xg_[at * 2 * D], &xg_n_[at * 2 * D], &mean_xg_[at], &rstd_xg_[at], B);
  n_xc_.forward(&xc_[at * D], &xc_n_[at * D], &mean_xc_[at], &rstd_xc_[at], B);
  n_hg_.forward(&hg_[at * 2 * D], &hg_n_[at * 2 * D], &mean_hg_[at], &rstd_hg_[at], B);
  n_hc_.forward(&hc_[at * D], &hc_n_[at * D], &mean_hc_[at], &rstd_hc_[at], B);
  gru_cell_forward(&xg_n_[at * 2 * D], &hg_n_[at * 2 * D], &xc_n_[at * D], &hc_n_[at * D], s_prev, nullptr, B, D,
                   &gates_[at * 2 * D], &cand_[at * D], s_next);

  for (int b = 0; b < B; ++b) {
    float* f = &features_[(at + b) * (D + A)];
    std::memcpy(f, s_next + int64_t{b} * D, D * sizeof(float));
    std::memcpy(f + D, &ctx_[(at + b) * A], A * sizeof(float));
  }
}

double RnnSearch::forward(const TranslationBatch& batch) {
  encode(batch);
  const int B = batch.batch, T = batch.target_steps, A = A_, D = config_.decoder_hidden, V = config_.vocab;
  target_steps_ = T;
  std::fill(states_.begin(), states_.begin() + int64_t{B} * D, 0.0f);
  for (int i = 0; i < T; ++i) decoder_step(i, &batch.target_in[int64_t{i} * B]);

  // The output layer on the rows that have a target only.
  loss_rows_.clear();
  loss_targets_.clear();
  for (int64_t r = 0; r < int64_t{T} * B; ++r)
    if (batch.target_out[r] >= 0) loss_rows_.push_back(r), loss_targets_.push_back(batch.target_out[r]);
  const int64_t n = static_cast<int64_t>(loss_rows_.size());
  if (n == 0) throw std::invalid_argument("RnnSearch: a batch without targets");
  const int F = D + A;
  loss_features_.resize(n * F);
  for (int64_t k = 0; k < n; ++k) std::memcpy(&loss_features_[k * F], &features_[loss_rows_[k] * F], F * sizeof(float));
  probs_.resize(n * V);
  matmul(loss_features_.data(), w_out_.data(), probs_.data(), static_cast<int>(n), F, V);
  add_bias(probs_.data(), b_out_.data(), n, V);
  const double loss = softmax_cross_entropy(probs_.data(), loss_targets_.data(), probs_.data(), nullptr, 0.0f, n, V);
  return loss / static_cast<double>(n);
}

void RnnSearch::attention_backward(int i, const float* dctx) {
  const int B = batch_, S = source_steps_, A = A_;
  const int smax = config_.max_source;
  const int64_t at = int64_t{i} * B;
  for (int b = 0; b < B; ++b) {
    const float* alpha = &alpha_[(at + b) * smax];
    const float* q = &q_[(at + b) * A];
    const float* dc = dctx + int64_t{b} * A;
    float* dq = &dq_[(at + b) * A];
    std::fill(dq, dq + A, 0.0f);
    // c = sum_j alpha_j a_j: dalpha_j = dc . a_j; then the softmax: dscore_j = alpha_j (dalpha_j - sum alpha dalpha).
    float weighted = 0.0f;
    float* dalpha = dalpha_.data();
    for (int j = 0; j < S; ++j) {
      const float* a = &annotations_[(int64_t{j} * B + b) * A];
      float d = 0.0f;
      for (int k = 0; k < A; ++k) d += dc[k] * a[k];
      dalpha[j] = d;
      weighted += alpha[j] * d;
    }
    for (int j = 0; j < S; ++j) {
      if (!source_active_[int64_t{j} * B + b]) continue;  // padding: alpha_j = 0 and no score
      const float dscore = alpha[j] * (dalpha[j] - weighted);
      const float* a = &annotations_[(int64_t{j} * B + b) * A];
      float* da = &dannotations_[(int64_t{j} * B + b) * A];
      // score_j = a_j . q, and a_j also enters c directly with weight alpha_j.
      for (int k = 0; k < A; ++k) {
        da[k] += alpha[j] * dc[k] + dscore * q[k];
        dq[k] += dscore * a[k];
      }
    }
  }
}

void RnnSearch::backward() {
  const int B = batch_, S = source_steps_, T = target_steps_, E = config_.embed, H = config_.encoder_hidden;
  const int A = A_, D = config_.decoder_hidden, V = config_.vocab, F = D + A;
  for (Param* p : params()) p->zero_grad();

  // Output layer: d(mean loss)/d logits = (probs - onehot) / N, scattered back to the decoder rows.
  const int64_t n = static_cast<int64_t>(loss_rows_.size());
  const float scale = 1.0f / static_cast<float>(n);
  dlogits_.resize(n * V);
  for (int64_t k = 0; k < n; ++k) {
    for (int v = 0; v < V; ++v) dlogits_[k * V + v] = probs_[k * V + v] * scale;
    dlogits_[k * V + loss_targets_[k]] -= scale;
  }
  gemm(true, false, F, V, static_cast<int>(n), 1.0f, loss_features_.data(), F, dlogits_.data(), V, 0.0f,
       w_out_.grad.data(), V);
  accumulate_bias_grad(dlogits_.data(), b_out_.grad.data(), n, V);
  dloss_features_.resize(n * F);
  gemm(false, true, static_cast<int>(n), F, V, 1.0f, dlogits_.data(), V, w_out_.data(), V, 0.0f,
       dloss_features_.data(), F);
  std::fill(dfeatures_.begin(), dfeatures_.begin() + int64_t{T} * B * F, 0.0f);
  for (int64_t k = 0; k < n; ++k)
    std::memcpy(&dfeatures_[loss_rows_[k] * F], &dloss_features_[k * F], F * sizeof(float));

  // The decoder, back through time. ds_ holds the gradient into s_{i+1} from later steps.
  std::fill(dannotations_.begin(), dannotations_.begin() + int64_t{S} * B * A, 0.0f);
  std::fill(ds_.begin(), ds_.end(), 0.0f);
  for (int i = T - 1; i >= 0; --i) {
    const int64_t at = int64_t{i} * B;
    for (int b = 0; b < B; ++b)
      for (int k = 0; k < D; ++k) ds_next_[int64_t{b} * D + k] = ds_[int64_t{b} * D + k] + dfeatures_[(at + b) * F + k];
    gru_cell_backward(ds_next_.data(), &gates_[at * 2 * D], &cand_[at * D], &hc_n_[at * D], &states_[at * D], nullptr,
                      B, D, &dgates_[at * 2 * D], &dxc_n_[at * D], dhc_n_.data(), ds_.data());
    n_hg_.backward(&dgates_[at * 2 * D], &hg_[at * 2 * D], &mean_hg_[at], &rstd_hg_[at], &dhg_[at * 2 * D], B);
    n_hc_.backward(dhc_n_.data(), &hc_[at * D], &mean_hc_[at], &rstd_hc_[at], &dhc_[at * D], B);
    n_xg_.backward(&dgates_[at * 2 * D], &xg_[at * 2 * D], &mean_xg_[at], &rstd_xg_[at], &dxg_[at * 2 * D], B);
    n_xc_.backward(&dxc_n_[at * D], &xc_[at * D], &mean_xc_[at], &rstd_xc_[at], &dxc_[at * D], B);

    // Into the GRU's input [e(y_{i-1}) ; c_i]: the embedding, and the context (plus the output layer's share).
    gemm(false, true, B, E + A, 2 * D, 1.0f, &dxg_[at * 2 * D], 2 * D, w_xg_.data(), 2 * D, 0.0f, ddec_x_.data(), E + A);
    gemm(false, true, B, E + A, D, 1.0f, &dxc_[at * D], D, w_xc_.data(), D, 1.0f, ddec_x_.data(), E + A);
    for (int b = 0; b < B; ++b) {
      const float* dx = &ddec_x_[int64_t{b} * (E + A)];
      float* de = &target_embedding_.grad[int64_t{prev_tokens_[at + b]} * E];
      for (int k = 0; k < E; ++k) de[k] += dx[k];
      for (int k = 0; k < A; ++k) dctx_[int64_t{b} * A + k] = dx[E + k] + dfeatures_[(at + b) * F + D + k];
    }
    attention_backward(i, dctx_.data());

    if (i > 0) {  // s_0 is the constant zero state: nothing flows into it
      gemm(false, true, B, D, 2 * D, 1.0f, &dhg_[at * 2 * D], 2 * D, u_g_.data(), 2 * D, 1.0f, ds_.data(), D);
      gemm(false, true, B, D, D, 1.0f, &dhc_[at * D], D, u_c_.data(), D, 1.0f, ds_.data(), D);
      gemm(false, true, B, D, A, 1.0f, &dq_[at * A], A, w_q_.data(), A, 1.0f, ds_.data(), D);
    }
  }
  // The decoder's weights, one product over all steps each (states_ blocks 0 .. T-1 are the s_{i-1}).
  const int rows = T * B;
  gemm(true, false, E + A, 2 * D, rows, 1.0f, dec_x_.data(), E + A, dxg_.data(), 2 * D, 0.0f, w_xg_.grad.data(), 2 * D);
  gemm(true, false, E + A, D, rows, 1.0f, dec_x_.data(), E + A, dxc_.data(), D, 0.0f, w_xc_.grad.data(), D);
  gemm(true, false, D, 2 * D, rows, 1.0f, states_.data(), D, dhg_.data(), 2 * D, 0.0f, u_g_.grad.data(), 2 * D);
  gemm(true, false, D, D, rows, 1.0f, states_.data(), D, dhc_.data(), D, 0.0f, u_c_.grad.data(), D);
  gemm(true, false, D, A, rows, 1.0f, states_.data(), D, dq_.data(), A, 0.0f, w_q_.grad.data(), A);

  // The encoder: each direction gets its half of the annotations' gradient.
  const int64_t src = int64_t{S} * B;
  for (int64_t r = 0; r < src; ++r) {
    std::memcpy(&dforward_[r * H], &dannotations_[r * A], H * sizeof(float));
    std::memcpy(&dbackward_[r * H], &dannotations_[r * A + H], H * sizeof(float));
  }
  encoder_forward_.backward(dforward_.data(), dsource_x_.data());
  encoder_backward_.backward(dbackward_.data(), dsource_x2_.data());
  for (int64_t r = 0; r < src; ++r) {
    float* de = &source_embedding_.grad[int64_t{source_tokens_[r]} * E];
    for (int k = 0; k < E; ++k) de[k] += dsource_x_[r * E + k] + dsource_x2_[r * E + k];
  }
}

std::vector<std::vector<int32_t>> RnnSearch::translate(const TranslationBatch& batch, int max_length) {
  encode(batch);
  const int B = batch.batch, A = A_, D = config_.decoder_hidden, V = config_.vocab, F = D + A;
  const int steps = std::min(max_length + 1, config_.max_target);
  std::fill(states_.begin(), states_.begin() + int64_t{B} * D, 0.0f);
  std::vector<std::vector<int32_t>> out(B);
  std::vector<int32_t> prev(B, kStartToken);
  std::vector<uint8_t> done(B, 0);
  std::vector<float> logits(static_cast<size_t>(B) * V);
  for (int i = 0; i < steps; ++i) {
    decoder_step(i, prev.data());
    matmul(&features_[int64_t{i} * B * F], w_out_.data(), logits.data(), B, F, V);
    add_bias(logits.data(), b_out_.data(), B, V);
    bool all_done = true;
    for (int b = 0; b < B; ++b) {
      const float* z = &logits[int64_t{b} * V];
      const int32_t best = static_cast<int32_t>(std::max_element(z, z + V) - z);
      prev[b] = best;
      if (done[b]) continue;
      if (best == kEndToken || static_cast<int>(out[b].size()) >= max_length) done[b] = 1;
      else out[b].push_back(best);
      all_done = all_done && done[b];
    }
    if (all_done) break;
  }
  return out;
}

}  // namespace repro
