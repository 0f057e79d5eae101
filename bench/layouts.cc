#include "layouts.h"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "registry/registry.h"
#include "tensor.h"

namespace rmsnorm_bench {
namespace {

void Check(rmsnorm_status status) {
  if (status != RMSNORM_OK) throw std::runtime_error(rmsnorm_last_error());
}

}  // namespace

std::vector<LayoutResult> RunLayoutCases(const std::vector<int> &thread_counts, const SamplingPolicy &policy) {
  std::vector<LayoutResult> results;
  const int threads_before = rmsnorm_get_num_threads();
  for (const int threads : thread_counts)
    for (const rmsnorm_dtype dtype : {RMSNORM_F32, RMSNORM_BF16}) {
      rmsnorm_set_num_threads(threads);
      for (const int64_t tokens : {int64_t{64}, int64_t{512}, int64_t{4096}})
        for (const bool huge_pages : {false, true}) {
          LayoutResult r{dtype, tokens, 32, 8, 128, threads, huge_pages, {}, {}};
          const int64_t width = (r.q_heads + 2 * r.kv_heads) * r.head_dim, rows = tokens * r.q_heads;
          const Tensor::Pages pages = huge_pages ? Tensor::Pages::kHuge : Tensor::Pages::kDefault;
          Tensor qkv(dtype, size_t(tokens * width), pages), packed(dtype, size_t(rows * r.head_dim), pages);
          qkv.FillRandom(1);
          packed.FillRandom(1);
          std::vector<float> weight(size_t(r.head_dim), 1.0f);

          rmsnorm_config_ex strided = rmsnorm_config_ex_init(rows, r.head_dim);
          strided.base.dtype = dtype;
          strided.inner_rows = r.q_heads;
          strided.x.outer = strided.y.outer = width;
          strided.x.inner = strided.y.inner = r.head_dim;
          rmsnorm_config plain = rmsnorm_config_init(rows, r.head_dim);
          plain.dtype = dtype;
          // In place, as QK-norm runs (after the first call the rows have a mean
          // square of 1).
          const std::vector<TimeStats> stats = MeasureInTurn(
              {[&] { Check(rmsnorm_forward_ex(&strided, qkv.data(), weight.data(), nullptr, qkv.data(), nullptr)); },
               [&] { Check(rmsnorm_forward(&plain, packed.data(), weight.data(), nullptr, packed.data(), nullptr)); }},
              policy);
          r.strided = stats[0];
          r.packed = stats[1];
          results.push_back(r);
        }
    }
  rmsnorm_set_num_threads(threads_before);
  return results;
}

void PrintLayoutResults(std::ostream &out, const std::vector<LayoutResult> &results, bool markdown) {
  if (results.empty()) return;
  out << (markdown ? "\n### Strided rows: QK-norm inside a QKV buffer\n\n"
                   : "\nStrided rows: QK-norm inside a QKV buffer\n")
      << "q heads normalized in place inside qkv[tokens][(32 + 2 * 8) * 128] "
         "(rmsnorm_forward_ex), against the "
         "same rows packed (rmsnorm_forward), alternated; median time per "
         "call; both buffers on 4 KiB pages, then both on transparent huge pages (thp). "
         "Target: strided / packed <= 1.10.\n";
  if (markdown)
    out << "\n| dtype | tokens x heads x dim | threads | pages | strided | packed | "
           "strided / packed |\n|---|---|---|---|---|---|---|\n";
  for (const LayoutResult &r : results) {
    char line[256];
    const double ratio = r.strided.median / r.packed.median;
    std::snprintf(line, sizeof line,
                  markdown ? "| %s | %lldx%lldx%lld | %d | %s | %.1f us | %.1f us | %.3f %s |\n"
                           : "  %-5s %5lldx%lldx%lld  t%d  %-3s  strided %9.1f us  packed %9.1f us  "
                             "ratio %.3f %s\n",
                  rmsnorm::registry::DtypeName(r.dtype), (long long)r.tokens, (long long)r.q_heads,
                  (long long)r.head_dim, r.threads, r.huge_pages ? "thp" : "4k", r.strided.median * 1e6,
                  r.packed.median * 1e6, ratio,
                  ratio <= 1.10 ? "PASS" : "MISS");
    out << line;
  }
}

}  // namespace rmsnorm_bench
