// RNNSearch (Bahdanau, Cho & Bengio 2015), the paper's translation model, at character level, with the
// paper's layer-normalized GRU (a norm with its own gain and bias on each of the four pre-activations
// of every GRU step, encoder and decoder alike):
//
//   encoder   a_j = [f_j ; b_j]: a forward and a backward SequenceGru over the source embeddings (H each)
//   attention q_i = s_{i-1} W_q,  alpha_ij = softmax_j(a_j . q_i) over the real source positions,
//             c_i = sum_j alpha_ij a_j   (bilinear scores, Luong's "general" form, instead of Bahdanau's
//             additive MLP: one dot product per position instead of a tanh layer, so the norms stay a
//             visible share of the step)
//   decoder   s_i = GRU(s_{i-1}, [e(y_{i-1}) ; c_i]) from s_0 = 0, gates normalized as in gru_cell.h
//   output    p(y_i) = softmax([s_i ; c_i] W_out + b_out)
//
// Token ids are shared by source and target: 0 ends a sentence (and pads), 1 starts the target.
// Activations are time-major: row t * B + b is sentence b at step t.
#ifndef RMSNORM_REPRO_MODELS_RNNSEARCH_H_
#define RMSNORM_REPRO_MODELS_RNNSEARCH_H_

#include <cstdint>
#include <vector>

#include "common/norm_layer.h"
#include "common/param.h"
#include "models/sequence_gru.h"

namespace repro {

constexpr int32_t kEndToken = 0;    // ends every target sentence; pads sources
constexpr int32_t kStartToken = 1;  // the decoder's first input

struct RnnSearchConfig {
  int vocab = 128;          // V: source and target characters together, and the special tokens
  int embed = 32;           // E
  int encoder_hidden = 64;  // H per direction: annotations are A = 2H wide
  int decoder_hidden = 128; // D
  int batch = 32;           // most sentences per call (B)
  int max_source = 64;      // most source steps per call (S)
  int max_target = 80;      // most target steps per call (T), the end token included
};

// A batch of sentence pairs, time-major and padded.
struct TranslationBatch {
  int batch = 0, source_steps = 0, target_steps = 0;
  std::vector<int32_t> source;         // (S, B): source characters, kEndToken after the end
  std::vector<uint8_t> source_active;  // (S, B): 1 where source holds a real character
  std::vector<int32_t> target_in;      // (T, B): kStartToken, then the target characters (teacher forcing)
  std::vector<int32_t> target_out;     // (T, B): the target characters, then kEndToken; -1 after (no loss)
};

// Pads sentences (character ids without start or end tokens) into a time-major batch: sources[b] and
// targets[b] are pair b. With no targets at all, a batch to translate (no target steps).
TranslationBatch make_translation_batch(const std::vector<const std::vector<int32_t>*>& sources,
                                        const std::vector<const std::vector<int32_t>*>& targets);

class RnnSearch {
 public:
  RnnSearch(const RnnSearchConfig& config, const NormConfig& norm, uint64_t seed, NormClock* clock);

  // Teacher-forced forward; returns the mean loss in nats over the target tokens (targets other than -1).
  double forward(const TranslationBatch& batch);
  // Gradients of the last forward's mean loss; overwrites every Param's grad.
  void backward();
  // Greedy decoding of batch.source (the targets are not read): per sentence the characters before the
  // first end token, at most max_length.
  std::vector<std::vector<int32_t>> translate(const TranslationBatch& batch, int max_length);

  std::vector<Param*> params();
  const RnnSearchConfig& config() const { return config_; }

 private:
  void encode(const TranslationBatch& batch);
  // Decoder step i for every sentence: attention from state i, the GRU to state i + 1, the output
  // features. prev: (B) the previous target tokens.
  void decoder_step(int i, const int32_t* prev);
  // Gradients of attention at step i: dctx (B, A) in; adds to dannotations_, writes dq_ rows of step i.
  void attention_backward(int i, const float* dctx);

  RnnSearchConfig config_;
  int A_;  // annotation width, 2H
  int batch_ = 0, source_steps_ = 0, target_steps_ = 0;

  // Parameters.
  Param source_embedding_, target_embedding_;  // (V, E) each
  SequenceGru encoder_forward_, encoder_backward_;
  Param w_q_;        // (D, A) state to attention query
  Param w_xg_;       // (E + A, 2D) decoder input [e(y) ; c] to gates [r | z]
  Param w_xc_;       // (E + A, D) to the candidate
  Param u_g_;        // (D, 2D)
  Param u_c_;        // (D, D)
  Param w_out_;      // (D + A, V)
  Param b_out_;      // (V)
  NormLayer n_xg_, n_xc_, n_hg_, n_hc_;  // the decoder's four norms

  // Encoder activations.
  std::vector<float> source_x_;       // (S * B, E) embedded source
  std::vector<uint8_t> source_active_;
  std::vector<int32_t> source_tokens_;
  std::vector<float> annotations_;    // (S * B, A)
  // Decoder activations, rows i * B + b.
  std::vector<int32_t> prev_tokens_;  // (T * B)
  std::vector<float> q_;              // (T * B, A)
  std::vector<float> alpha_;          // (T * B, S) attention weights (0 on padding)
  std::vector<float> ctx_;            // (T * B, A)
  std::vector<float> dec_x_;          // (T * B, E + A) [e(y_{i-1}) ; c_i]
  std::vector<float> xg_, xg_n_, xc_, xc_n_, hg_, hg_n_, hc_, hc_n_;  // (T * B, 2D | D)
  std::vector<float> mean_xg_, rstd_xg_, mean_xc_, rstd_xc_, mean_hg_, rstd_hg_, mean_hc_, rstd_hc_;  // (T * B)
  std::vector<float> gates_, cand_;   // (T * B, 2D), (T * B, D)
  std::vector<float> states_;         // ((T + 1) * B, D): block 0 is s_0 = 0
  std::vector<float> features_;       // (T * B, D + A) [s_i ; c_i]
  // The loss rows: those with a target, gathered.
  std::vector<int64_t> loss_rows_;    // (N) decoder rows with target_out >= 0
  std::vector<int32_t> loss_targets_; // (N)
  std::vector<float> loss_features_;  // (N, D + A)
  std::vector<float> probs_;          // (N, V)

  // Gradient scratch.
  std::vector<float> dlogits_;        // (N, V)
  std::vector<float> dloss_features_; // (N, D + A)
  std::vector<float> dfeatures_;      // (T * B, D + A)
  std::vector<float> dgates_, dxc_n_; // (T * B, 2D | D) into N_xg and N_hg, into N_xc
  std::vector<float> dhc_n_;          // (B, D) into N_hc
  std::vector<float> dxg_, dxc_, dhg_, dhc_;  // (T * B, 2D | D) out of the four norms
  std::vector<float> ddec_x_;         // (B, E + A)
  std::vector<float> dctx_;           // (B, A)
  std::vector<float> dalpha_;         // (S) one sentence's attention-weight gradients
  std::vector<float> dq_;             // (T * B, A)
  std::vector<float> ds_, ds_next_;   // (B, D)
  std::vector<float> dannotations_;   // (S * B, A)
  std::vector<float> dforward_, dbackward_;  // (S * B, H): dannotations_ split by direction
  std::vector<float> dsource_x_, dsource_x2_;  // (S * B, E) from each direction
};

}  // namespace repro

#endif  // RMSNORM_REPRO_MODELS_RNNSEARCH_H_
