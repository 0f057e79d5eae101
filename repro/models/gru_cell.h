// The element-wise part of one step of the paper's layer-normalized GRU, for a block of rows, forward
// and backward. The matrix products and the four norms around it belong to the callers (SequenceGru,
// the RNNSearch decoder), which differ in where the inputs come from:
//
//   r, z = sigmoid(xg + hg)        xg = N_xg(x W_xg), hg = N_hg(h U_g): (rows, 2H) as [r | z]
//   c    = tanh(xc + r * hc)       xc = N_xc(x W_xc), hc = N_hc(h U_c): (rows, H); the reset gate after the norm
//   h'   = z * h + (1 - z) * c
#ifndef RMSNORM_REPRO_MODELS_GRU_CELL_H_
#define RMSNORM_REPRO_MODELS_GRU_CELL_H_

#include <cstdint>

namespace repro {

// xg, hg: (rows, 2H); xc, hc, h_prev: (rows, H); active: (rows), or nullptr for all rows: an inactive
// row (padding) keeps its state, h_next = h_prev. Writes gates: (rows, 2H) [r | z] after the sigmoid,
// cand: (rows, H) c after the tanh, h_next: (rows, H).
void gru_cell_forward(const float* xg, const float* hg, const float* xc, const float* hc, const float* h_prev,
                      const uint8_t* active, int64_t rows, int hidden, float* gates, float* cand, float* h_next);

// dh_next: (rows, H), the gradient of the loss with respect to h_next; gates, cand, hc, h_prev: as in the
// forward. Writes dgates: (rows, 2H), the gradient of both xg and hg (they are summed); dxc, dhc: (rows, H),
// of xc and hc; dh_prev: (rows, H), the direct path z * dh_next (for an inactive row all of dh_next, and
// zero pre-activation gradients). dh_prev may alias dh_next.
void gru_cell_backward(const float* dh_next, const float* gates, const float* cand, const float* hc,
                       const float* h_prev, const uint8_t* active, int64_t rows, int hidden, float* dgates, float* dxc,
                       float* dhc, float* dh_prev);

}  // namespace repro

#endif  // RMSNORM_REPRO_MODELS_GRU_CELL_H_
