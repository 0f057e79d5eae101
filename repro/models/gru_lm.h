// A GRU character-level language model with the norm on the four pre-activations of the cell, as in
// the paper's RNNSearch (layer-normalized GRU of Nematus):
//
//   r, z = sigmoid(N_xg(x W_xg) + N_hg(h U_g))          gates, 2H wide, each norm with its own gain and bias
//   c    = tanh(N_xc(x W_xc) + r * N_hc(h U_c))         candidate: the reset gate applies after the norm
//   h'   = z * h + (1 - z) * c
//   logits = h' W_out + b_out
//
// The norms' biases are the cell's biases (with kNone each "norm" only adds its bias, a plain GRU).
// The recurrence is a SequenceGru; activations are time-major (row t * B + b is sequence b at time t).
#ifndef RMSNORM_REPRO_MODELS_GRU_LM_H_
#define RMSNORM_REPRO_MODELS_GRU_LM_H_

#include <cstdint>
#include <vector>

#include "common/norm_layer.h"
#include "common/param.h"
#include "models/sequence_gru.h"

namespace repro {

struct GruLmConfig {
  int vocab = 64;   // V
  int embed = 64;   // E
  int hidden = 256; // H
  int batch = 32;   // B
  int seq_len = 64; // T
};

class GruLm {
 public:
  GruLm(const GruLmConfig& config, const NormConfig& norm, uint64_t seed, NormClock* clock);

  // tokens: (B, T + 1) int32, batch-major: sequence b is tokens[b * (T + 1) + 0 .. T]; it predicts
  // token t + 1 from tokens 0..t, from a zero initial state. Returns the mean loss in nats over B * T.
  double forward(const int32_t* tokens);
  // Gradients of the last forward's mean loss; overwrites every Param's grad.
  void backward();

  std::vector<Param*> params();
  const GruLmConfig& config() const { return config_; }

 private:
  GruLmConfig config_;
  int64_t rows_;  // T * B

  // Parameters: the embedding, the GRU layer (its weights and four norms), the output layer.
  Param embedding_;  // (V, E)
  SequenceGru gru_;  // E -> H
  Param w_out_;      // (H, V)
  Param b_out_;      // (V)

  // Activations of the last forward, time-major (row t * B + b).
  std::vector<int32_t> inputs_, targets_;   // (T * B)
  std::vector<float> x_;                    // (T * B, E) embedded inputs
  std::vector<float> probs_;                // (T * B, V) softmax of the logits

  // Gradient scratch.
  std::vector<float> dlogits_;              // (T * B, V)
  std::vector<float> dh_out_;               // (T * B, H) from the output layer
  std::vector<float> dx_;                   // (T * B, E)
};

}  // namespace repro

#endif  // RMSNORM_REPRO_MODELS_GRU_LM_H_
