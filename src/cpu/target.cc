// The library's choice of Highway target, and the name it reports.
//
// The library keeps its own hwy::ChosenTarget instead of Highway's process-wide one, so that choosing a
// target (RMSNORM_CPU_TARGET, rmsnorm_set_cpu_target) changes only this library's kernels and leaves
// any other Highway user in the process alone.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/target.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include "hwy/highway.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "cpu/cpu.h"
#include "cpu/native_bf16.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {
const char* TargetNameImpl() { return hwy::TargetName(HWY_TARGET); }
}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rmsnorm::cpu {
namespace {

bool SameName(const char* a, const char* b) {
  for (; *a != '\0' && *b != '\0'; ++a, ++b)
    if (std::toupper(static_cast<unsigned char>(*a)) != std::toupper(static_cast<unsigned char>(*b))) return false;
  return *a == *b;
}

// The pseudo-target above AVX3: AVX3 with bf16 rounded by the CPU's instruction (native_bf16.h).
constexpr char kAvx3Bf16[] = "AVX3_BF16";
constexpr bool kHaveAvx3Bf16 = HWY_ARCH_X86 && (HWY_TARGETS & HWY_AVX3) != 0;

// The targets this build has, best first, comma-separated.
std::string CompiledTargetNames() {
  std::string names = kHaveAvx3Bf16 ? kAvx3Bf16 : "";
  for (int64_t targets = HWY_TARGETS; targets != 0; targets &= targets - 1) {
    if (!names.empty()) names += ", ";
    names += hwy::TargetName(targets & -targets);
  }
  return names;
}

// The compiled target called `name` (EMU128 and SCALAR both name the portable fallback), or 0.
int64_t CompiledTarget(const char* name) {
  for (int64_t targets = HWY_TARGETS; targets != 0; targets &= targets - 1) {
    const int64_t target = targets & -targets;
    if (SameName(name, hwy::TargetName(target))) return target;
  }
  const int64_t fallback = HWY_TARGETS & (HWY_EMU128 | HWY_SCALAR);
  if (fallback != 0 && (SameName(name, "EMU128") || SameName(name, "SCALAR"))) return fallback & -fallback;
  return 0;
}

// Targets at or below `target` in Highway's order (a higher bit is a lesser target); all for 0.
int64_t AtOrBelow(int64_t target) { return target == 0 ? ~int64_t{0} : ~(target - 1); }

// The limit `name` sets: its target, or 0 (no limit) for null, "" or "auto"; false for a name this
// build does not have. *native_bf16: whether the limit allows AVX3_BF16 (no limit, or that name).
bool LimitFor(const char* name, int64_t* limit, bool* native_bf16) {
  *limit = 0;
  *native_bf16 = kHaveAvx3Bf16;
  if (name == nullptr || *name == '\0' || SameName(name, "auto")) return true;
  if (kHaveAvx3Bf16 && SameName(name, kAvx3Bf16)) {
    *limit = HWY_AVX3;
    return true;
  }
  *native_bf16 = false;
  *limit = CompiledTarget(name);
  return *limit != 0;
}

// Chooses the best target the CPU has within the limit, and whether bf16 rounds natively on it.
void Choose(hwy::ChosenTarget& chosen, int64_t limit, bool native_bf16) {
  const int64_t targets = hwy::SupportedTargets() & AtOrBelow(limit);
  chosen.Update(targets);
  const int64_t best = targets & HWY_TARGETS & -(targets & HWY_TARGETS);
  native_bf16_rounding.store(native_bf16 && best == HWY_AVX3 && CpuHasAvx512Bf16(), std::memory_order_relaxed);
}

// The limit RMSNORM_CPU_TARGET sets (0 for none), and whether it allows AVX3_BF16.
std::pair<int64_t, bool> LimitFromEnvironment() {
  const char* env = std::getenv("RMSNORM_CPU_TARGET");
  int64_t limit;
  bool native_bf16;
  if (!LimitFor(env, &limit, &native_bf16))
    std::fprintf(stderr, "rmsnorm: RMSNORM_CPU_TARGET=%s is not a target of this build (%s, or auto); using the best the CPU has\n",
                 env, CompiledTargetNames().c_str());
  return {limit, native_bf16};
}

hwy::ChosenTarget& Chosen() {
  static hwy::ChosenTarget chosen;
  static const bool initialized = [] {
    const auto [limit, native_bf16] = LimitFromEnvironment();
    Choose(chosen, limit, native_bf16);
    return true;
  }();
  (void)initialized;
  return chosen;
}

// RMSNORM_CPU_TARGET is read when the library loads, not at its first call.
[[maybe_unused]] const bool kChosenAtLoad = (Chosen(), true);

}  // namespace

size_t ChosenTargetIndex() { return Chosen().GetIndex(); }

bool SetTarget(const char* name, std::string* error) {
  int64_t limit;
  bool native_bf16;
  if (!LimitFor(name, &limit, &native_bf16)) {
    *error = std::string("unknown CPU target \"") + name + "\": this build has " + CompiledTargetNames() +
             " (or \"auto\" for the best the CPU has)";
    return false;
  }
  Choose(Chosen(), limit, native_bf16);
  return true;
}

HWY_EXPORT(TargetNameImpl);
const char* TargetName() {
  if (NativeBf16Rounding()) return kAvx3Bf16;
  return RMSNORM_DYNAMIC_DISPATCH(TargetNameImpl)();
}

}  // namespace rmsnorm::cpu
#endif
