// A GRU character-level language model with the norm on the four pre-activations of the cell, as in
// the paper's RNNSearch (layer-normalized GRU of Nematus):
//
//   r, z = sigmoid(N_xg(x W_xg) + N_hg(h U_g))          gates, 2H wide, each norm with its own gain and bias
//   c    = tanh(N_xc(x W_xc) + r * N_hc(h U_c))         candidate: the reset gate applies after the norm
//   h'   = z * h + (1 - z) * c
//   logits = h' W_out + b_out
//
// The norms' biases are the cell's biases (with kNone each "norm" only adds its bias, a plain GRU).
// Activations are stored time-major: row t * B + b is sequence b at time t, so one time step is a
// contiguous (B, ...) block for the per-step products and norms.
#ifndef RMSNORM_REPRO_MODELS_GRU_LM_H_
#define RMSNORM_REPRO_MODELS_GRU_LM_H_

#include <cstdint>
#include <vector>

#include "common/norm_layer.h"
#include "common/param.h"

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

  // Parameters.
  Param embedding_;  // (V, E)
  Param w_xg_;       // (E, 2H)  input to gates [r | z]
  Param w_xc_;       // (E, H)   input to candidate
  Param u_g_;        // (H, 2H)  hidden to gates
  Param u_c_;        // (H, H)   hidden to candidate
  Param w_out_;      // (H, V)
  Param b_out_;      // (V)
  NormLayer n_xg_, n_xc_, n_hg_, n_hc_;

  // Activations of the last forward, time-major.
  std::vector<int32_t> inputs_, targets_;   // (T * B)
  std::vector<float> x_;                    // (T * B, E) embedded inputs
  std::vector<float> xg_, xg_n_;            // (T * B, 2H) x W_xg, and normalized
  std::vector<float> xc_, xc_n_;            // (T * B, H)
  std::vector<float> hg_, hg_n_;            // (T * B, 2H) h_{t-1} U_g, and normalized
  std::vector<float> hc_, hc_n_;            // (T * B, H)
  std::vector<float> mean_xg_, rstd_xg_, mean_xc_, rstd_xc_, mean_hg_, rstd_hg_, mean_hc_, rstd_hc_;  // (T * B)
  std::vector<float> gates_;                // (T * B, 2H) [r | z] after the sigmoid
  std::vector<float> cand_;                 // (T * B, H) c after the tanh
  std::vector<float> h_;                    // ((T + 1) * B, H): block 0 is the zero initial state
  std::vector<float> probs_;                // (T * B, V) softmax of the logits

  // Gradient scratch.
  std::vector<float> dlogits_;              // (T * B, V)
  std::vector<float> dh_out_;               // (T * B, H) from the output layer
  std::vector<float> dh_;                   // (B, H) into the current step
  // Into the norms (d of their outputs) and out of them (d of their inputs). Separate buffers: the
  // library allows dx to alias dy, but its in-place backward is several times slower.
  std::vector<float> dxg_n_, dxc_n_;        // (T * B, 2H), (T * B, H): into the input-side norms
  std::vector<float> dhg_n_, dhc_n_;        // (B, 2H), (B, H): into the hidden-side norms, one step
  std::vector<float> dxg_, dxc_;            // (T * B, 2H), (T * B, H): out of the input-side norms
  std::vector<float> dhg_, dhc_;            // (T * B, 2H), (T * B, H): out of the hidden-side norms
  std::vector<float> dx_;                   // (T * B, E)
};

}  // namespace repro

#endif  // RMSNORM_REPRO_MODELS_GRU_LM_H_
