// Reports the Highway target the kernels dispatch to, by dispatching exactly as they do.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/target.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include "hwy/highway.h"

#include "cpu/cpu.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {
const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }
}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rmsnorm::cpu {
HWY_EXPORT(TargetNameImpl);
const char* TargetName() { return HWY_DYNAMIC_DISPATCH(TargetNameImpl)(); }
}  // namespace rmsnorm::cpu
#endif
