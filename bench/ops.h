// One case bound to the library's C ABI over a workspace: the call that is timed.
#ifndef RMSNORM_BENCH_OPS_H_
#define RMSNORM_BENCH_OPS_H_

#include <vector>

#include "cases.h"
#include "workspace.h"

namespace rmsnorm_bench {

// Training-style calls: the forward saves its statistics (rstd; LayerNorm also mean), the backward
// takes them and produces dx and dweight (LayerNorm also dbias). RMSNorm, pRMSNorm and L2-Norm have a
// gain and no bias; LayerNorm has both, as in the paper. eps is the library default.
class OpCall {
 public:
  // Runs the forward once when the case needs saved statistics. Throws std::runtime_error with the
  // library's message if any call fails.
  OpCall(const Case& c, Workspace& workspace);

  // One call of the case (a forward and then a backward for fwd+bwd). Throws on failure.
  void Run();

 private:
  void Call(rmsnorm::registry::Op op);
  void Forward();
  void Backward();

  Case case_;
  rmsnorm_config config_;
  const float* weight_;
  const float* bias_;
  const void* x_ = nullptr;
  const void* residual_ = nullptr;
  const void* dy_ = nullptr;
  void* y_ = nullptr;
  void* residual_out_ = nullptr;
  void* dx_ = nullptr;
  std::vector<float> mean_, rstd_;       // (rows)
  std::vector<float> dweight_, dbias_;  // (cols)
};

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_OPS_H_
