// One normalization layer of a model, under the norm chosen at run time. Every normalization in the
// trainers goes through the rmsnorm library here; this file also times those calls, so a run can
// report the share of step time spent normalizing.
#ifndef RMSNORM_REPRO_COMMON_NORM_LAYER_H_
#define RMSNORM_REPRO_COMMON_NORM_LAYER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/param.h"

namespace repro {

// No norm, or a norm of the library's registry (src/registry/norms.inc), in the order of the paper's
// tables. kAddRmsNorm (the fused residual add) is an operation, not a layer: all_norms() leaves it out
// and a NormLayer refuses it.
enum class NormKind {
  kNone,
#define RMSNORM_NORM(Id, ...) k##Id,
#include "registry/norms.inc"
#undef RMSNORM_NORM
};

// The names used on the command line, in results.json and in the report: "none" and the registry's.
const char* norm_name(NormKind kind);
// Throws std::invalid_argument listing the valid names.
NormKind parse_norm(const std::string& name);
std::vector<NormKind> all_norms();  // none, layernorm, l2norm, rmsnorm, prmsnorm

struct NormConfig {
  NormKind kind = NormKind::kRmsNorm;
  float partial = 0.0625f;  // pRMSNorm's p (6.25%, the paper's default)
  float eps = 1e-5f;        // the same eps for every norm, inside the square root
};

// Wall time spent inside normalization (forward and backward), summed over a model's layers.
struct NormClock {
  double seconds = 0.0;
  int64_t calls = 0;
};

// y = norm(x) * gain + bias over rows of `cols` elements. Gain starts at 1 and bias at 0. With
// NormKind::kNone the layer is y = x + bias: the model keeps the bias it would have had anyway, and the
// gain is neither used nor trained.
class NormLayer {
 public:
  NormLayer(const std::string& name, int64_t cols, const NormConfig& config, NormClock* clock);

  // x, y: (rows, cols) f32, y may alias x; mean, rstd: (rows) f32, the statistics backward needs
  // (mean is written by LayerNorm only, but must be given).
  void forward(const float* x, float* y, float* mean, float* rstd, int64_t rows);
  // dy, x, dx: (rows, cols) f32, dx may alias dy; mean, rstd: what forward saved for this x.
  // Adds this call's gradients to gain.grad and bias.grad (a layer used at every time step sums them).
  void backward(const float* dy, const float* x, const float* mean, const float* rstd, float* dx, int64_t rows);

  // The trained parameters of this layer (bias always; gain unless kNone).
  void collect(std::vector<Param*>& params);

  int64_t cols() const { return cols_; }
  const NormConfig& config() const { return config_; }

  Param gain;  // (cols)
  Param bias;  // (cols)

 private:
  int64_t cols_;
  NormConfig config_;
  NormClock* clock_;
  std::vector<float> dgain_, dbias_;  // (cols): the library overwrites; we accumulate into the Params
};

}  // namespace repro

#endif  // RMSNORM_REPRO_COMMON_NORM_LAYER_H_
