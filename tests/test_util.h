// Shared by the tests: cases described once, run through the C ABI on either backend, compared
// element by element with tolerances derived from the dtype, the magnitudes involved and the length.
#ifndef RMSNORM_TESTS_TEST_UTIL_H_
#define RMSNORM_TESTS_TEST_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rmsnorm/rmsnorm.h"
#include "registry/registry.h"
#include "rmsnorm/rmsnorm.hpp"

namespace rmsnorm::test {

// ---- Row tensors in any storage dtype ------------------------------------------------------------

class RowTensor {
 public:
  RowTensor() = default;
  RowTensor(rmsnorm_dtype dtype, int64_t rows, int64_t cols);
  double get(int64_t i) const;
  void set(int64_t i, double v);  // rounds to the dtype
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }
  int64_t size() const { return rows_ * cols_; }
  rmsnorm_dtype dtype() const { return dtype_; }
  size_t bytes() const { return bytes_.size(); }
  bool BitwiseEqual(const RowTensor& other) const { return bytes_ == other.bytes_; }

 private:
  rmsnorm_dtype dtype_ = RMSNORM_F32;
  int64_t rows_ = 0, cols_ = 0;
  std::vector<uint8_t> bytes_;
};

using registry::DtypeName;
// Every dtype of registry/dtypes.inc, in its order.
const std::vector<rmsnorm_dtype>& AllDtypes();
// Unit in the last place of |v| in the dtype (subnormal spacing below the normal range).
double Ulp(rmsnorm_dtype dtype, double v);

// ---- Cases ---------------------------------------------------------------------------------------

// What a case normalizes: a norm of registry/norms.inc (kPRmsNorm is kRmsNorm with the case's partial).
using Op = registry::Norm;
const char* OpName(Op op);

struct Case {
  Op op = Op::kRmsNorm;
  rmsnorm_dtype dtype = RMSNORM_F32;
  int64_t rows = 3, cols = 64;
  float partial = 1.0f;
  float eps = 1e-6f;
  float weight_offset = 0.0f;
  bool weight = true, bias = false;
  uint32_t seed = 1;
  std::string Name() const;
  rmsnorm_config Config() const;
};

// Random numbers from integer arithmetic and exact double operations: the same on every CPU (unlike
// std::normal_distribution, which calls libm, and under emulation took much of the suite's time).
uint64_t SplitMix(uint64_t& state);  // SplitMix64: advances the state, returns 64 random bits
// Uniform in [center - spread, center + spread), from 24 random bits.
double Uniform(uint64_t& state, double center, double spread);

// Inputs, filled from the case's seed (through Uniform, so the same on every CPU): x in 0.7 +- 2.5 (a
// mean that makes re-centering matter), residual and dy in 0 +- 1.5, gains in 1 +- 0.5 (a correction in
// 0 +- 0.5 with a gain offset), biases in 0 +- 0.8.
struct Inputs {
  RowTensor x, residual, dy;
  std::vector<float> weight, bias;
};
Inputs MakeInputs(const Case& c);

struct Outputs {
  RowTensor y, residual_out, dx;
  std::vector<float> mean, rstd, dweight, dbias;
};

// Runs the case's forward (backward) through the C ABI on the given backend. The backward takes the
// saved statistics when `saved` is non-null, else recomputes them. Expects RMSNORM_OK.
Outputs RunForward(const Case& c, const Inputs& in, rmsnorm_backend backend);
Outputs RunBackward(const Case& c, const Inputs& in, const Outputs* saved, rmsnorm_backend backend);
// The same on whichever backend the process has selected when the call starts.
Outputs RunForward(const Case& c, const Inputs& in);
Outputs RunBackward(const Case& c, const Inputs& in, const Outputs* saved);

// ---- Comparison ----------------------------------------------------------------------------------

// |got - want| <= tolerance elementwise, where NaN matches only NaN. On failure the message names
// the worst element and the max difference; on success it is empty.
std::string Compare(const char* what, const std::vector<double>& got, const std::vector<double>& want,
                    const std::vector<double>& tolerance);
std::vector<double> Values(const RowTensor& t);
std::vector<double> Values(const std::vector<float>& v);

// Per-element tolerances for a case's outputs, from the inputs in double: each is one unit in the last
// place of the output dtype plus f32's epsilon times the magnitude of the terms that make the value,
// times a factor growing with the reduction length (f32 partial sums).
struct Tolerances {
  std::vector<double> y, dx, mean, rstd, dweight, dbias;
};
Tolerances ForwardTolerances(const Case& c, const Inputs& in, const Outputs& ref);
Tolerances BackwardTolerances(const Case& c, const Inputs& in, const Outputs& ref);

// ---- SIMD targets --------------------------------------------------------------------------------

// Every Highway target this binary's library was compiled for and this machine runs.
std::vector<int64_t> AvailableTargets();
std::string TargetName(int64_t target);
// Restricts the library's dispatch to one target for the lifetime of the object.
class ScopedTarget {
 public:
  explicit ScopedTarget(int64_t target);
  ~ScopedTarget();
};

// Restores the process-wide settings the tests change.
class ScopedThreads {
 public:
  explicit ScopedThreads(int n) : saved_(rmsnorm_get_num_threads()) { rmsnorm_set_num_threads(n); }
  ~ScopedThreads() { rmsnorm_set_num_threads(saved_); }

 private:
  int saved_;
};

}  // namespace rmsnorm::test

#endif  // RMSNORM_TESTS_TEST_UTIL_H_
