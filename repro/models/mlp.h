// An MLP classifier for Fashion-MNIST with the norm on each hidden layer's summed inputs, before the
// nonlinearity (the paper's placement: a = W x, y = f(norm(a) * g + b)):
//
//   h_1 = relu(N_1(x W_1)),  h_2 = relu(N_2(h_1 W_2)),  logits = h_2 W_3 + b_3
//
// With kNone the "norms" only add their bias (a plain MLP).
#ifndef RMSNORM_REPRO_MODELS_MLP_H_
#define RMSNORM_REPRO_MODELS_MLP_H_

#include <cstdint>
#include <vector>

#include "common/norm_layer.h"
#include "common/param.h"

namespace repro {

struct MlpConfig {
  int inputs = 784;   // I
  int hidden = 256;   // H
  int classes = 10;   // K
  int batch = 128;    // B, the most rows one forward takes
};

class Mlp {
 public:
  Mlp(const MlpConfig& config, const NormConfig& norm, uint64_t seed, NormClock* clock);

  // x: (rows, I) f32; labels: (rows) int32; rows <= B. Returns the mean loss in nats; `errors`, if
  // given, receives the number of misclassified rows.
  double forward(const float* x, const int32_t* labels, int64_t rows, int64_t* errors = nullptr);
  // Gradients of the last forward's mean loss; overwrites every Param's grad.
  void backward();

  std::vector<Param*> params();
  const MlpConfig& config() const { return config_; }

 private:
  MlpConfig config_;
  Param w_1_, w_2_, w_3_, b_3_;  // (I, H), (H, H), (H, K), (K)
  NormLayer n_1_, n_2_;

  int64_t rows_ = 0;
  const float* x_ = nullptr;      // (rows, I), the caller's
  std::vector<int32_t> labels_;   // (B)
  std::vector<float> a_1_, h_1_, a_2_, h_2_;  // (B, H): products, then relu(norm(.))
  std::vector<float> mean_1_, rstd_1_, mean_2_, rstd_2_;  // (B)
  std::vector<float> probs_;      // (B, K)
  std::vector<float> dlogits_;    // (B, K)
  std::vector<float> dh_, da_;    // (B, H)
};

}  // namespace repro

#endif  // RMSNORM_REPRO_MODELS_MLP_H_
