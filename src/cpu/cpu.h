// The fast backend: SIMD kernels for every Highway target, chosen at run time, threaded over
// fixed row blocks. Same contract as the reference (src/ref/norms.h), which is its oracle.
#ifndef RMSNORM_SRC_CPU_CPU_H_
#define RMSNORM_SRC_CPU_CPU_H_

#include <cstddef>
#include <string>

#include "runtime/problem.h"

namespace rmsnorm::cpu {

void RmsForward(const Problem& p, const ForwardArgs& args);  // with args.residual: fused add
// The same writing the normalized rows quantized (args.y unused), with or without the fused add.
void RmsForwardQuantized(const Problem& p, const ForwardArgs& args, const QuantizedOutput& out);
void RmsBackward(const Problem& p, const BackwardArgs& args);
void LayerNormForward(const Problem& p, const ForwardArgs& args);
void LayerNormBackward(const Problem& p, const BackwardArgs& args);

// The entry points above, per dtype: each kernel file's compile for that dtype defines them (see
// RMSNORM_KERNEL_DTYPE in dispatch.h), and dtype_dispatch.cc calls the one for a call's dtype.
#define RMSNORM_DTYPE(Id, ...)                                                                        \
  void RmsForward_##Id(const Problem& p, const ForwardArgs& args);                                    \
  void RmsForwardQuantized_##Id(const Problem& p, const ForwardArgs& args, const QuantizedOutput& out); \
  void RmsBackward_##Id(const Problem& p, const BackwardArgs& args);                                  \
  void LayerNormForward_##Id(const Problem& p, const ForwardArgs& args);                              \
  void LayerNormBackward_##Id(const Problem& p, const BackwardArgs& args);
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE

// The Highway target the kernels dispatch to now ("AVX2", "SSE4", ...), or "AVX3_BF16" for AVX3 with
// native bf16 rounding (native_bf16.h).
const char* TargetName();

// Limits the kernels to the best target the CPU has at or below `name` ("AVX3_BF16", "AVX2", "SCALAR", ...;
// null, "" or "auto" for no limit). False, with a message, for a name this build does not have. The
// first choice is RMSNORM_CPU_TARGET's, read once at load.
bool SetTarget(const char* name, std::string* error);

// The index of the chosen target in a HWY_EXPORT table.
size_t ChosenTargetIndex();

}  // namespace rmsnorm::cpu

// HWY_DYNAMIC_DISPATCH on the library's own choice of target (see target.cc).
#define RMSNORM_DYNAMIC_DISPATCH(FUNC_NAME) (*(HWY_DISPATCH_TABLE(FUNC_NAME)[::rmsnorm::cpu::ChosenTargetIndex()]))

#endif  // RMSNORM_SRC_CPU_CPU_H_
