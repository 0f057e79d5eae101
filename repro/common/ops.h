// Element-wise layers shared by the models, each with its forward and backward. Plain loops: these are
// not matrix products, and they run on the calling thread in a fixed order (deterministic).
#ifndef RMSNORM_REPRO_COMMON_OPS_H_
#define RMSNORM_REPRO_COMMON_OPS_H_

#include <cmath>
#include <cstdint>

namespace repro {

inline float sigmoid(float a) { return 1.0f / (1.0f + std::exp(-a)); }
// tanh(a) = 2 sigmoid(2a) - 1: glibc's tanhf is several times slower than its expf, and was half of the
// Transformer's step time through GELU. Absolute error about 1e-7.
inline float tanh_via_exp(float a) { return 2.0f / (1.0f + std::exp(-2.0f * a)) - 1.0f; }

// Softmax cross-entropy over rows of `classes` logits, fused forward and backward.
// logits: (rows, classes) f32; targets: (rows) int32; probs: (rows, classes) f32 out (may alias logits).
// Returns the summed loss in nats (double). With dlogits given: dlogits: (rows, classes) =
// (probs - onehot(target)) * scale, the gradient of scale * (summed loss); may alias probs.
double softmax_cross_entropy(const float* logits, const int32_t* targets, float* probs, float* dlogits,
                             float scale, int64_t rows, int64_t classes);

// Number of rows whose largest logit is not the target (ties go to the lowest index).
// logits: (rows, classes); targets: (rows).
int64_t count_errors(const float* logits, const int32_t* targets, int64_t rows, int64_t classes);

// y: (rows, cols) += bias: (cols), broadcast over rows.
void add_bias(float* y, const float* bias, int64_t rows, int64_t cols);
// dbias: (cols) += column sums of dy: (rows, cols).
void accumulate_bias_grad(const float* dy, float* dbias, int64_t rows, int64_t cols);

// GELU, tanh approximation (as in GPT-2). x, y, dy, dx: (n).
void gelu_forward(const float* x, float* y, int64_t n);
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n);

// ReLU. x, y: (n); backward uses the output y (y > 0 where x > 0); dx may alias dy.
void relu_forward(const float* x, float* y, int64_t n);
void relu_backward(const float* y, const float* dy, float* dx, int64_t n);

}  // namespace repro

#endif  // RMSNORM_REPRO_COMMON_OPS_H_
