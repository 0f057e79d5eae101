#include "models/sequence_gru.h"

#include <algorithm>
#include <cmath>

#include "common/blas.h"
#include "models/gru_cell.h"

namespace repro {

SequenceGru::SequenceGru(const std::string& name, int input, int hidden, int max_steps, int max_batch, bool reverse,
                         const NormConfig& norm, NormClock* clock)
    : input_(input),
      hidden_(hidden),
      reverse_(reverse),
      w_xg_(name + ".w_xg", int64_t{input} * 2 * hidden),
      w_xc_(name + ".w_xc", int64_t{input} * hidden),
      u_g_(name + ".u_g", int64_t{hidden} * 2 * hidden),
      u_c_(name + ".u_c", int64_t{hidden} * hidden),
      n_xg_(name + ".n_xg", 2 * hidden, norm, clock),
      n_xc_(name + ".n_xc", hidden, norm, clock),
      n_hg_(name + ".n_hg", 2 * hidden, norm, clock),
      n_hc_(name + ".n_hc", hidden, norm, clock) {
  const int64_t n = int64_t{max_steps} * max_batch, H = hidden;
  for (auto* v : {&xg_, &xg_n_, &hg_, &hg_n_, &gates_, &dgates_, &dxg_, &dhg_}) v->resize(n * 2 * H);
  for (auto* v : {&xc_, &xc_n_, &hc_, &hc_n_, &cand_, &dxc_n_, &dxc_, &dhc_, &outputs_}) v->resize(n * H);
  for (auto* v : {&mean_xg_, &rstd_xg_, &mean_xc_, &rstd_xc_, &mean_hg_, &rstd_hg_, &mean_hc_, &rstd_hc_}) v->resize(n);
  states_.assign((n + max_batch) * H, 0.0f);
  for (auto* v : {&dhc_n_, &dh_, &dh_next_}) v->resize(int64_t{max_batch} * H);
}

void SequenceGru::init(Rng& rng) {
  w_xg_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(input_)));
  w_xc_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(input_)));
  u_g_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(hidden_)));
  u_c_.init_normal(rng, 1.0 / std::sqrt(static_cast<double>(hidden_)));
}

void SequenceGru::collect_weights(std::vector<Param*>& params) {
  for (Param* p : {&w_xg_, &w_xc_, &u_g_, &u_c_}) params.push_back(p);
}

void SequenceGru::collect_norms(std::vector<Param*>& params) {
  for (NormLayer* n : {&n_xg_, &n_xc_, &n_hg_, &n_hc_}) n->collect(params);
}

void SequenceGru::forward(const float* x, const uint8_t* active, int steps, int batch) {
  steps_ = steps, batch_ = batch, x_ = x, active_ = active;
  const int B = batch, H = hidden_, I = input_;
  const int64_t rows = int64_t{steps} * B;

  // The input side of every step at once: one product and one norm call over all rows.
  matmul(x, w_xg_.data(), xg_.data(), static_cast<int>(rows), I, 2 * H);
  matmul(x, w_xc_.data(), xc_.data(), static_cast<int>(rows), I, H);
  n_xg_.forward(xg_.data(), xg_n_.data(), mean_xg_.data(), rstd_xg_.data(), rows);
  n_xc_.forward(xc_.data(), xc_n_.data(), mean_xc_.data(), rstd_xc_.data(), rows);

  std::fill(states_.begin(), states_.begin() + int64_t{B} * H, 0.0f);
  for (int k = 0; k < steps; ++k) {
    const int64_t at = int64_t{k} * B;            // processing-order rows of this step
    const int64_t in = int64_t{time_of(k)} * B;   // time-order rows
    const float* h_prev = &states_[at * H];
    float* h_next = &states_[(at + B) * H];
    matmul(h_prev, u_g_.data(), &hg_[at * 2 * H], B, H, 2 * H);
    matmul(h_prev, u_c_.data(), &hc_[at * H], B, H, H);
    n_hg_.forward(&hg_[at * 2 * H], &hg_n_[at * 2 * H], &mean_hg_[at], &rstd_hg_[at], B);
    n_hc_.forward(&hc_[at * H], &hc_n_[at * H], &mean_hc_[at], &rstd_hc_[at], B);
    gru_cell_forward(&xg_n_[in * 2 * H], &hg_n_[at * 2 * H], &xc_n_[in * H], &hc_n_[at * H], h_prev,
                     active ? active + in : nullptr, B, H, &gates_[at * 2 * H], &cand_[at * H], h_next);
    std::copy(h_next, h_next + int64_t{B} * H, &outputs_[in * H]);
  }
}

void SequenceGru::backward(const float* dout, float* dx) {
  const int B = batch_, H = hidden_, I = input_;
  const int64_t rows = int64_t{steps_} * B;

  // Back through time. dh_ holds the gradient into the state before the step being undone, from later steps.
  std::fill(dh_.begin(), dh_.end(), 0.0f);
  for (int k = steps_ - 1; k >= 0; --k) {
    const int64_t at = int64_t{k} * B, in = int64_t{time_of(k)} * B;
    for (int64_t i = 0; i < int64_t{B} * H; ++i) dh_next_[i] = dh_[i] + dout[in * H + i];
    gru_cell_backward(dh_next_.data(), &gates_[at * 2 * H], &cand_[at * H], &hc_n_[at * H], &states_[at * H],
                      active_ ? active_ + in : nullptr, B, H, &dgates_[in * 2 * H], &dxc_n_[in * H], dhc_n_.data(),
                      dh_.data());
    // Through the hidden-side norms, then the products with the previous state.
    n_hg_.backward(&dgates_[in * 2 * H], &hg_[at * 2 * H], &mean_hg_[at], &rstd_hg_[at], &dhg_[at * 2 * H], B);
    n_hc_.backward(dhc_n_.data(), &hc_[at * H], &mean_hc_[at], &rstd_hc_[at], &dhc_[at * H], B);
    if (k > 0) {  // the first state is the constant zero: nothing flows into it
      gemm(false, true, B, H, 2 * H, 1.0f, &dhg_[at * 2 * H], 2 * H, u_g_.data(), 2 * H, 1.0f, dh_.data(), H);
      gemm(false, true, B, H, H, 1.0f, &dhc_[at * H], H, u_c_.data(), H, 1.0f, dh_.data(), H);
    }
  }
  // dU = sum_k state_k^T dpre_k: one product over all steps (states_ blocks 0 .. steps-1 precede the steps).
  const int n = static_cast<int>(rows);
  gemm(true, false, H, 2 * H, n, 1.0f, states_.data(), H, dhg_.data(), 2 * H, 0.0f, u_g_.grad.data(), 2 * H);
  gemm(true, false, H, H, n, 1.0f, states_.data(), H, dhc_.data(), H, 0.0f, u_c_.grad.data(), H);

  // The input side, all steps at once.
  n_xg_.backward(dgates_.data(), xg_.data(), mean_xg_.data(), rstd_xg_.data(), dxg_.data(), rows);
  n_xc_.backward(dxc_n_.data(), xc_.data(), mean_xc_.data(), rstd_xc_.data(), dxc_.data(), rows);
  gemm(true, false, I, 2 * H, n, 1.0f, x_, I, dxg_.data(), 2 * H, 0.0f, w_xg_.grad.data(), 2 * H);
  gemm(true, false, I, H, n, 1.0f, x_, I, dxc_.data(), H, 0.0f, w_xc_.grad.data(), H);
  gemm(false, true, n, I, 2 * H, 1.0f, dxg_.data(), 2 * H, w_xg_.data(), 2 * H, 0.0f, dx, I);
  gemm(false, true, n, I, H, 1.0f, dxc_.data(), H, w_xc_.data(), H, 1.0f, dx, I);
}

}  // namespace repro
