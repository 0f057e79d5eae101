// A small post-norm Transformer character-level language model (decoder only, causal attention), the
// placement of the paper's Transformer experiment (Vaswani et al. 2017):
//
//   x_0 = tok_emb[c] + pos_emb[t]
//   per layer:  x' = N_1(x + Attention(x)),  x = N_2(x' + FFN(x'))        FFN = GELU MLP, 4C wide
//   logits = x W_lm + b_lm
//
// With kNone the "norms" only add their bias (a post-norm Transformer without normalization).
// Activations are batch-major: row b * T + t.
#ifndef RMSNORM_REPRO_MODELS_TRANSFORMER_LM_H_
#define RMSNORM_REPRO_MODELS_TRANSFORMER_LM_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/norm_layer.h"
#include "common/param.h"

namespace repro {

struct TransformerLmConfig {
  int vocab = 64;      // V
  int channels = 128;  // C
  int heads = 4;       // C % heads == 0
  int layers = 2;
  int batch = 16;      // B
  int seq_len = 64;    // T
};

class TransformerLm {
 public:
  TransformerLm(const TransformerLmConfig& config, const NormConfig& norm, uint64_t seed, NormClock* clock);

  // tokens: (B, T + 1) int32; sequence b predicts tokens[b][t + 1] from tokens[b][0..t].
  // Returns the mean loss in nats over B * T.
  double forward(const int32_t* tokens);
  // Gradients of the last forward's mean loss; overwrites every Param's grad.
  void backward();

  std::vector<Param*> params();
  const TransformerLmConfig& config() const { return config_; }

 private:
  struct Layer {
    Param w_qkv, b_qkv;  // (C, 3C), (3C): [q | k | v], head h at columns h * C/heads
    Param w_o, b_o;      // (C, C), (C)
    Param w_fc, b_fc;    // (C, 4C), (4C)
    Param w_proj, b_proj;// (4C, C), (C)
    NormLayer n_1, n_2;
    // Activations, N = B * T rows.
    std::vector<float> qkv;        // (N, 3C)
    std::vector<float> att;        // (B, heads, T, T) softmax probabilities, zero above the diagonal
    std::vector<float> att_out;    // (N, C) heads concatenated
    std::vector<float> res_1;      // (N, C) x + attention, the input of N_1
    std::vector<float> x_1;        // (N, C) N_1's output
    std::vector<float> fc;         // (N, 4C) before GELU
    std::vector<float> fc_gelu;    // (N, 4C)
    std::vector<float> res_2;      // (N, C) x_1 + FFN, the input of N_2
    std::vector<float> out;        // (N, C) N_2's output: the next layer's input
    std::vector<float> mean_1, rstd_1, mean_2, rstd_2;  // (N)
    Layer(int index, const TransformerLmConfig& c, const NormConfig& norm, NormClock* clock);
  };

  void attention_forward(Layer& layer);
  // d_att_out: (N, C) in; writes d_qkv: (N, 3C).
  void attention_backward(Layer& layer, const float* d_att_out, float* d_qkv);

  TransformerLmConfig config_;
  int64_t rows_;  // N = B * T
  Param tok_emb_, pos_emb_;  // (V, C), (T, C)
  Param w_lm_, b_lm_;        // (C, V), (V)
  std::vector<std::unique_ptr<Layer>> layers_;

  std::vector<int32_t> inputs_, targets_;  // (N)
  std::vector<float> x_0_;                 // (N, C) embeddings
  std::vector<float> probs_;               // (N, V)

  // Gradient scratch.
  std::vector<float> dlogits_;             // (N, V)
  std::vector<float> dx_, dres_, dtmp_;    // (N, C)
  std::vector<float> dfc_;                 // (N, 4C)
  std::vector<float> dqkv_;                // (N, 3C)
  std::vector<float> datt_;                // (T, T) one head's score gradient
};

}  // namespace repro

#endif  // RMSNORM_REPRO_MODELS_TRANSFORMER_LM_H_
