#include "models/gru_cell.h"

#include <algorithm>

#include "common/ops.h"

namespace repro {

void gru_cell_forward(const float* xg_all, const float* hg_all, const float* xc_all, const float* hc_all,
                      const float* h_prev_all, const uint8_t* active, int64_t rows, int H, float* gates_all,
                      float* cand_all, float* h_next_all) {
  for (int64_t b = 0; b < rows; ++b) {
    const float* xg = xg_all + b * 2 * H;
    const float* hg = hg_all + b * 2 * H;
    const float* xc = xc_all + b * H;
    const float* hc = hc_all + b * H;
    const float* h_prev = h_prev_all + b * H;
    float* gates = gates_all + b * 2 * H;
    float* cand = cand_all + b * H;
    float* h_next = h_next_all + b * H;
    for (int j = 0; j < 2 * H; ++j) gates[j] = sigmoid(xg[j] + hg[j]);
    for (int j = 0; j < H; ++j) {
      const float r = gates[j], z = gates[H + j];
      cand[j] = tanh_via_exp(xc[j] + r * hc[j]);
      h_next[j] = z * h_prev[j] + (1.0f - z) * cand[j];
    }
    if (active != nullptr && !active[b]) std::copy(h_prev, h_prev + H, h_next);
  }
}

void gru_cell_backward(const float* dh_next_all, const float* gates_all, const float* cand_all, const float* hc_all,
                       const float* h_prev_all, const uint8_t* active, int64_t rows, int H, float* dgates_all,
                       float* dxc_all, float* dhc_all, float* dh_prev_all) {
  for (int64_t b = 0; b < rows; ++b) {
    const float* dh_next = dh_next_all + b * H;
    float* dgates = dgates_all + b * 2 * H;
    float* dxc = dxc_all + b * H;
    float* dhc = dhc_all + b * H;
    float* dh_prev = dh_prev_all + b * H;
    if (active != nullptr && !active[b]) {  // the state passed through unchanged
      std::fill(dgates, dgates + 2 * H, 0.0f);
      std::fill(dxc, dxc + H, 0.0f);
      std::fill(dhc, dhc + H, 0.0f);
      if (dh_prev != dh_next) std::copy(dh_next, dh_next + H, dh_prev);
      continue;
    }
    const float* gates = gates_all + b * 2 * H;
    const float* cand = cand_all + b * H;
    const float* hc = hc_all + b * H;
    const float* h_prev = h_prev_all + b * H;
    for (int j = 0; j < H; ++j) {
      const float r = gates[j], z = gates[H + j], c = cand[j], hp = h_prev[j];
      const float d = dh_next[j];
      const float dc_pre = d * (1.0f - z) * (1.0f - c * c);  // through h' = z h + (1 - z) c, then tanh
      const float dz_pre = d * (hp - c) * z * (1.0f - z);
      const float dr_pre = dc_pre * hc[j] * r * (1.0f - r);
      dxc[j] = dc_pre;
      dhc[j] = dc_pre * r;
      dgates[j] = dr_pre;
      dgates[H + j] = dz_pre;
      dh_prev[j] = d * z;
    }
  }
}

}  // namespace repro
