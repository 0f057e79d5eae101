// The fast backend: SIMD kernels for every Highway target, chosen at run time, threaded over
// fixed row blocks. Same contract as the reference (src/ref/norms.h), which is its oracle.
#ifndef RMSNORM_SRC_CPU_CPU_H_
#define RMSNORM_SRC_CPU_CPU_H_

#include "runtime/problem.h"

namespace rmsnorm::cpu {

void RmsForward(const Problem& p, const ForwardArgs& args);  // with args.residual: fused add
void RmsBackward(const Problem& p, const BackwardArgs& args);
void LayerNormForward(const Problem& p, const ForwardArgs& args);
void LayerNormBackward(const Problem& p, const BackwardArgs& args);

// The Highway target the kernels dispatch to now ("AVX2", "SSE4", ...).
const char* TargetName();

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_CPU_H_
