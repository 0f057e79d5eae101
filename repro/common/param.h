// A trainable tensor: its values and the gradient the backward pass writes. Models own their Params
// and hand the optimizer pointers to them.
#ifndef RMSNORM_REPRO_COMMON_PARAM_H_
#define RMSNORM_REPRO_COMMON_PARAM_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/rng.h"

namespace repro {

struct Param {
  std::string name;
  std::vector<float> value;  // flat, row-major in the shape the model's comments give
  std::vector<float> grad;   // same size; the model's backward overwrites or accumulates it
  bool decay = true;         // weight decay applies (matrices), or not (gains, biases)

  Param() = default;
  Param(std::string n, int64_t size, bool decays = true)
      : name(std::move(n)), value(size, 0.0f), grad(size, 0.0f), decay(decays) {}
  int64_t size() const { return static_cast<int64_t>(value.size()); }
  float* data() { return value.data(); }
  const float* data() const { return value.data(); }
  void zero_grad() { std::fill(grad.begin(), grad.end(), 0.0f); }
  void fill(float v) { std::fill(value.begin(), value.end(), v); }
  // Normal(0, stddev) entries, drawn in a fixed order from rng.
  void init_normal(Rng& rng, double stddev) {
    for (float& v : value) v = static_cast<float>(rng.normal() * stddev);
  }
};

inline int64_t count_parameters(const std::vector<Param*>& params) {
  int64_t n = 0;
  for (const Param* p : params) n += p->size();
  return n;
}

}  // namespace repro

#endif  // RMSNORM_REPRO_COMMON_PARAM_H_
