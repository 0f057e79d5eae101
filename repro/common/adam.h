// AdamW (Loshchilov & Hutter) with global gradient-norm clipping and a warmup + cosine learning-rate
// schedule: the same optimizer and schedule for every norm of a task, so only the norm differs.
#ifndef RMSNORM_REPRO_COMMON_ADAM_H_
#define RMSNORM_REPRO_COMMON_ADAM_H_

#include <cstdint>
#include <vector>

#include "common/param.h"

namespace repro {

struct AdamConfig {
  float lr = 1e-3f;           // peak learning rate
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  float weight_decay = 0.0f;  // decoupled, on Params with decay = true
  float clip_norm = 0.0f;     // clip the global gradient norm to this (0: no clipping)
  int64_t warmup_steps = 0;   // linear warmup from 0 to lr
  int64_t total_steps = 1;    // cosine decay from lr to lr * final_fraction at total_steps
  float final_fraction = 0.1f;
};

class Adam {
 public:
  Adam(std::vector<Param*> params, const AdamConfig& config);
  // One update with the gradients in the Params; `step` counts from 0. Returns the gradient norm before
  // clipping (NaN or infinity when training diverged: the update is then skipped).
  double step(int64_t step);
  float learning_rate(int64_t step) const;

 private:
  std::vector<Param*> params_;
  AdamConfig config_;
  std::vector<std::vector<float>> m_, v_;
};

}  // namespace repro

#endif  // RMSNORM_REPRO_COMMON_ADAM_H_
