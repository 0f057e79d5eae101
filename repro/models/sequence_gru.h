// One layer of the paper's layer-normalized GRU run over a whole time-major sequence, forward or
// reversed (the backward half of a bidirectional encoder), with padding rows that keep their state.
// The input side x W is computed and normalized for all steps in one call each; the hidden side once
// per step. See gru_cell.h for the cell.
#ifndef RMSNORM_REPRO_MODELS_SEQUENCE_GRU_H_
#define RMSNORM_REPRO_MODELS_SEQUENCE_GRU_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/norm_layer.h"
#include "common/param.h"
#include "common/rng.h"

namespace repro {

class SequenceGru {
 public:
  // input: width of x (I); hidden: H. A call runs at most max_steps steps of max_batch rows.
  SequenceGru(const std::string& name, int input, int hidden, int max_steps, int max_batch, bool reverse,
              const NormConfig& norm, NormClock* clock);
  // W_xg, W_xc ~ N(0, 1/I), then U_g, U_c ~ N(0, 1/H), drawn in that order from rng.
  void init(Rng& rng);

  // x: (steps * batch, I) time-major (row t * batch + b), kept by reference until backward; active:
  // (steps * batch) nonzero for real inputs, 0 for padding (the state carries over), or nullptr.
  // Starts from a zero state (at t = 0, or at t = steps - 1 when reversed).
  void forward(const float* x, const uint8_t* active, int steps, int batch);
  // (steps * batch, H): the state after each time step, in time order also when reversed.
  const float* outputs() const { return outputs_.data(); }

  // dout: (steps * batch, H), the loss's gradient with respect to outputs(). Writes dx: (steps * batch, I);
  // overwrites the weights' grads and adds to the norms' (callers zero every grad first).
  void backward(const float* dout, float* dx);

  void collect_weights(std::vector<Param*>& params);  // W_xg, W_xc, U_g, U_c
  void collect_norms(std::vector<Param*>& params);    // the four norms' gains and biases

 private:
  int time_of(int k) const { return reverse_ ? steps_ - 1 - k : k; }  // the time step processed k-th

  int input_, hidden_;
  bool reverse_;
  int steps_ = 0, batch_ = 0;
  const float* x_ = nullptr;
  const uint8_t* active_ = nullptr;

  Param w_xg_;  // (I, 2H) input to gates [r | z]
  Param w_xc_;  // (I, H)  input to candidate
  Param u_g_;   // (H, 2H) hidden to gates
  Param u_c_;   // (H, H)  hidden to candidate
  NormLayer n_xg_, n_xc_, n_hg_, n_hc_;

  // Rows in time order (t * B + b): the input side, computed for all steps at once.
  std::vector<float> xg_, xg_n_, xc_, xc_n_;  // (steps * B, 2H | H) x W, and normalized
  std::vector<float> mean_xg_, rstd_xg_, mean_xc_, rstd_xc_;
  std::vector<float> outputs_;                // (steps * B, H)
  // Rows in processing order (k * B + b): the recurrence.
  std::vector<float> hg_, hg_n_, hc_, hc_n_;  // (steps * B, 2H | H) h U, and normalized
  std::vector<float> mean_hg_, rstd_hg_, mean_hc_, rstd_hc_;
  std::vector<float> gates_, cand_;           // (steps * B, 2H), (steps * B, H)
  std::vector<float> states_;                 // ((steps + 1) * B, H): block k is the state before step k

  // Gradient scratch. Into the norms (their outputs' gradients) and out of them (their inputs').
  std::vector<float> dgates_, dxc_n_;         // (steps * B, 2H), (steps * B, H), time order: into N_xg (and N_hg), N_xc
  std::vector<float> dhc_n_;                  // (B, H): into N_hc, one step
  std::vector<float> dxg_, dxc_;              // (steps * B, 2H | H), time order: out of N_xg, N_xc
  std::vector<float> dhg_, dhc_;              // (steps * B, 2H | H), processing order: out of N_hg, N_hc
  std::vector<float> dh_, dh_next_;           // (B, H): into the state being undone
};

}  // namespace repro

#endif  // RMSNORM_REPRO_MODELS_SEQUENCE_GRU_H_
