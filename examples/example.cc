#include <cstdio>
#include <vector>

#include <rmsnorm/rmsnorm.hpp>

int main() {
  using rmsnorm::bf16;
  const int64_t rows = 2, cols = 4;
  const float values[] = {1, 2, 3, 4, -1, 0.5f, 0, 2};
  std::vector<bf16> x, y(rows * cols), dy(rows * cols, bf16(1.0f)), dx(rows * cols);
  for (float v : values) x.push_back(bf16(v));  // bf16 storage, f32 arithmetic inside
  std::vector<float> gain(cols, 1.0f), rstd(rows), dgain(cols);
  const auto args = rmsnorm::NormArgs{}.with_weight(gain).with_eps(1e-5f);

  // Forward, saving rstd for the backward; then dx and the gain's gradient in one fused pass.
  rmsnorm::rms_norm(rmsnorm::matrix(x, cols), rmsnorm::matrix(y, cols), args, rstd);
  rmsnorm::rms_norm_backward(rmsnorm::matrix(dy, cols), rmsnorm::matrix(x, cols), rmsnorm::matrix(dx, cols), args,
                             rstd, rmsnorm::ParamGrads{dgain, {}});
  std::printf("y[0] = %.4f  rstd[0] = %.4f  dgain[0] = %.4f\n", float(y[0]), rstd[0], dgain[0]);

  try {  // shapes are checked: a gain of the wrong length throws
    std::vector<float> short_gain(cols - 1);
    rmsnorm::rms_norm(rmsnorm::matrix(x, cols), rmsnorm::matrix(y, cols), rmsnorm::NormArgs{}.with_weight(short_gain));
  } catch (const rmsnorm::Error& e) {
    std::printf("refused: %s\n", e.what());
  }
  return 0;
}
