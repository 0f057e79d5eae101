// The kernels' entry points (cpu.h): each calls the compile of the kernel files for the call's dtype
// (RMSNORM_KERNEL_DTYPE, dispatch.h), which then dispatches on the SIMD target.
#include <iterator>

#include "cpu/cpu.h"
#include "cpu/dispatch.h"
#include "registry/registry.h"

namespace rmsnorm::cpu {
namespace {

// One dtype's compile of the kernel files.
struct KernelEntries {
  decltype(&RmsForward) rms_forward;
  decltype(&RmsForwardQuantized) rms_forward_quantized;
  decltype(&RmsBackward) rms_backward;
  decltype(&LayerNormForward) layernorm_forward;
  decltype(&LayerNormBackward) layernorm_backward;
};

// In the order of registry/dtypes.inc, as DtypeId.
constexpr KernelEntries kEntries[] = {
#define RMSNORM_DTYPE(Id, ...) \
  {RmsForward_##Id, RmsForwardQuantized_##Id, RmsBackward_##Id, LayerNormForward_##Id, LayerNormBackward_##Id},
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE
};

static_assert(std::size(kEntries) == std::size(registry::kDtypes));

// A dtype the C ABI has checked (runtime/check.cc): its place in the registry is its place here.
const KernelEntries& For(rmsnorm_dtype dtype) { return kEntries[&registry::Dtype(dtype) - registry::kDtypes]; }

}  // namespace

void RmsForward(const Problem& p, const ForwardArgs& args) { For(p.dtype).rms_forward(p, args); }
void RmsForwardQuantized(const Problem& p, const ForwardArgs& args, const QuantizedOutput& out) {
  For(p.dtype).rms_forward_quantized(p, args, out);
}
void RmsBackward(const Problem& p, const BackwardArgs& args) { For(p.dtype).rms_backward(p, args); }
void LayerNormForward(const Problem& p, const ForwardArgs& args) { For(p.dtype).layernorm_forward(p, args); }
void LayerNormBackward(const Problem& p, const BackwardArgs& args) { For(p.dtype).layernorm_backward(p, args); }

}  // namespace rmsnorm::cpu
