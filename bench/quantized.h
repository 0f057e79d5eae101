// The figure for fused quantized outputs (issue 16): rmsnorm_forward_quantized against the forward
// followed by a separate quantization pass, and against a copy of the same bytes, alternated in one run.
#ifndef RMSNORM_BENCH_QUANTIZED_H_
#define RMSNORM_BENCH_QUANTIZED_H_

#include <cstdint>
#include <ostream>
#include <vector>

#include "rmsnorm/rmsnorm.h"
#include "timing.h"

namespace rmsnorm_bench {

struct QuantizedResult {
  int64_t rows, cols;
  int threads;
  // f32 x -> int8 q and per-row scales; then the same call for fp8 (per-row scale) and q8_0.
  TimeStats fused_int8, fused_fp8, fused_q8_0;
  TimeStats forward_then_pass;  // rmsnorm_forward to f32 y, then the int8 quantizer over y
  TimeStats copy_nontemporal, copy_ordinary;  // read the f32 x, write a byte per element
};

// 8192x4096 f32 at each thread count.
std::vector<QuantizedResult> RunQuantizedCases(const std::vector<int> &thread_counts, const SamplingPolicy &policy);
void PrintQuantizedResults(std::ostream &out, const std::vector<QuantizedResult> &results, bool markdown);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_QUANTIZED_H_
