// Whether bf16 outputs are rounded by the CPU's own instruction, VCVTNEPS2BF16 (AVX512_BF16), on
// the AVX3 target. Highway 1.0.3 has no target with that extension, so the choice is ours: the
// pseudo-target "AVX3_BF16", above AVX3 in the order rmsnorm_set_cpu_target limits by (target.cc).
// The instruction rounds to nearest even like ours but flushes subnormals to zero; convert-inl.h
// sends vectors holding one to the software rounding, so the bits do not change.
#ifndef RMSNORM_SRC_CPU_NATIVE_BF16_H_
#define RMSNORM_SRC_CPU_NATIVE_BF16_H_

#include <atomic>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace rmsnorm::cpu {

// Read by the kernels per stored vector, or once per loop of paired stores (relaxed: set between
// calls). Each binary that compiles the kernels has its own copy (the library's is hidden): the tests'
// kernels follow theirs (test_util.cc).
inline std::atomic<bool> native_bf16_rounding{false};

inline bool NativeBf16Rounding() { return native_bf16_rounding.load(std::memory_order_relaxed); }

// CPUID.(EAX=7, ECX=1):EAX bit 5. The OS saves the AVX-512 state whenever the AVX3 target is chosen.
inline bool CpuHasAvx512Bf16() {
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) != 0 && (eax & (1u << 5)) != 0;
#else
  return false;
#endif
}

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_NATIVE_BF16_H_
