#include "common/ops.h"

#include <cmath>

namespace repro {

double softmax_cross_entropy(const float* logits, const int32_t* targets, float* probs, float* dlogits,
                             float scale, int64_t rows, int64_t classes) {
  double loss = 0.0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * classes;
    float* p = probs + r * classes;
    const int32_t t = targets[r];
    const float z_target = z[t];  // read before probs overwrites the logits in place
    float zmax = z[0];
    for (int64_t c = 1; c < classes; ++c) zmax = std::fmax(zmax, z[c]);
    double sum = 0.0;
    for (int64_t c = 0; c < classes; ++c) {
      p[c] = std::exp(z[c] - zmax);
      sum += p[c];
    }
    const float inv = static_cast<float>(1.0 / sum);
    // log p_t = z_t - zmax - log(sum), taken from the logits so a tiny p_t loses no precision.
    loss += -(static_cast<double>(z_target) - zmax - std::log(sum));
    for (int64_t c = 0; c < classes; ++c) p[c] *= inv;
    if (dlogits != nullptr) {
      float* d = dlogits + r * classes;
      for (int64_t c = 0; c < classes; ++c) d[c] = p[c] * scale;
      d[t] -= scale;
    }
  }
  return loss;
}

int64_t count_errors(const float* logits, const int32_t* targets, int64_t rows, int64_t classes) {
  int64_t errors = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* z = logits + r * classes;
    int64_t best = 0;
    for (int64_t c = 1; c < classes; ++c)
      if (z[c] > z[best]) best = c;
    errors += best != targets[r];
  }
  return errors;
}

void add_bias(float* y, const float* bias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] += bias[c];
}

void accumulate_bias_grad(const float* dy, float* dbias, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dbias[c] += dy[r * cols + c];
}

namespace {
constexpr float kGeluScale = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluCubic = 0.044715f;
}  // namespace

// GELU(x) = 0.5 x (1 + tanh(u)) = x sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3).
void gelu_forward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    y[i] = v * sigmoid(2.0f * kGeluScale * (v + kGeluCubic * v * v * v));
  }
}

// d/dx x s(2u) = s + x s (1 - s) 2 u',  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
void gelu_backward(const float* x, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float s = sigmoid(2.0f * kGeluScale * (v + kGeluCubic * v * v * v));
    const float du = kGeluScale * (1.0f + 3.0f * kGeluCubic * v * v);
    dx[i] = dy[i] * (s + 2.0f * v * s * (1.0f - s) * du);
  }
}

void relu_forward(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

void relu_backward(const float* y, const float* dy, float* dx, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

}  // namespace repro
