// Figures for the strided layouts of the _ex calls (issue 16): a strided call
// against the plain call on the same rows packed, alternated in one run.
#ifndef RMSNORM_BENCH_LAYOUTS_H_
#define RMSNORM_BENCH_LAYOUTS_H_

#include <cstdint>
#include <ostream>
#include <vector>

#include "rmsnorm/rmsnorm.h"
#include "timing.h"

namespace rmsnorm_bench {

struct LayoutResult {
  rmsnorm_dtype dtype;
  int64_t tokens, q_heads, kv_heads, head_dim;
  int threads;
  bool huge_pages;  // both buffers on transparent huge pages (Tensor::Pages::kHuge)
  TimeStats strided, packed;
};

// QK-norm over the q heads, in place inside qkv[tokens][(q_heads + 2 *
// kv_heads) * head_dim], against the same number of rows packed, in place, at
// each of a few token counts, f32 and bf16, at each thread count, on 4 KiB pages and on huge pages
// (the qkv buffer is 1.5 times the q rows, so on 4 KiB pages it also costs more TLB misses).
std::vector<LayoutResult> RunLayoutCases(const std::vector<int> &thread_counts, const SamplingPolicy &policy);
void PrintLayoutResults(std::ostream &out, const std::vector<LayoutResult> &results, bool markdown);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_LAYOUTS_H_
