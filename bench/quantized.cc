#include "quantized.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "quantize_loops.h"
#include "tensor.h"

namespace rmsnorm_bench {
namespace {

void Check(rmsnorm_status status) {
  if (status != RMSNORM_OK) throw std::runtime_error(rmsnorm_last_error());
}

}  // namespace

std::vector<QuantizedResult> RunQuantizedCases(const std::vector<int> &thread_counts, const SamplingPolicy &policy) {
  std::vector<QuantizedResult> results;
  const int threads_before = rmsnorm_get_num_threads();
  const int64_t rows = 8192, cols = 4096;
  const size_t n = size_t(rows * cols);
  Tensor x(RMSNORM_F32, n), y(RMSNORM_F32, n), q(RMSNORM_F32, n / 4);  // q: n bytes
  Tensor q8_0(RMSNORM_F32, n / 32 * 34 / 4 + 1);
  x.FillRandom(1);
  std::vector<float> weight(static_cast<size_t>(cols), 1.0f), scales(static_cast<size_t>(rows));
  const auto *x_data = static_cast<const float *>(x.data());
  auto *y_data = static_cast<float *>(y.data());
  auto *q_bytes = static_cast<uint8_t *>(q.data());
  const rmsnorm_config_ex config = rmsnorm_config_ex_init(rows, cols);
  const rmsnorm_config plain = rmsnorm_config_init(rows, cols);
  const auto fused = [&](rmsnorm_quant_format format, void *out) {
    return [&config, &weight, &scales, x_data, format, out] {
      Check(rmsnorm_forward_quantized(&config, format, x_data, weight.data(), nullptr, out,
                                      format == RMSNORM_QUANT_Q8_0 ? nullptr : scales.data(), nullptr));
    };
  };
  for (const int threads : thread_counts) {
    rmsnorm_set_num_threads(threads);
    QuantizedResult r{rows, cols, threads, {}, {}, {}, {}, {}, {}};
    const std::vector<TimeStats> stats = MeasureInTurn(
        {fused(RMSNORM_QUANT_INT8_ROW, q_bytes), fused(RMSNORM_QUANT_FP8_E4M3_ROW, q_bytes),
         fused(RMSNORM_QUANT_Q8_0, q8_0.data()),
         [&] {
           Check(rmsnorm_forward(&plain, x_data, weight.data(), nullptr, y_data, nullptr));
           QuantizeInt8Rows(y_data, rows, cols, reinterpret_cast<int8_t *>(q_bytes), scales.data(), threads);
         },
         [&] { NarrowingCopy(x_data, n, q_bytes, StreamStores::kNonTemporal, threads); },
         [&] { NarrowingCopy(x_data, n, q_bytes, StreamStores::kOrdinary, threads); }},
        policy);
    r.fused_int8 = stats[0];
    r.fused_fp8 = stats[1];
    r.fused_q8_0 = stats[2];
    r.forward_then_pass = stats[3];
    r.copy_nontemporal = stats[4];
    r.copy_ordinary = stats[5];
    results.push_back(r);
  }
  rmsnorm_set_num_threads(threads_before);
  return results;
}

void PrintQuantizedResults(std::ostream &out, const std::vector<QuantizedResult> &results, bool markdown) {
  if (results.empty()) return;
  out << (markdown ? "\n### Fused quantized output: f32 in, int8 out\n\n" : "\nFused quantized output: f32 in, int8 out\n")
      << "rmsnorm_forward_quantized (INT8_ROW) against rmsnorm_forward to f32 followed by the same int8 "
         "quantizer as a separate pass, and against the faster copy (non-temporal or ordinary stores) of "
         "the bytes the fused call moves (read f32, write a byte per element); alternated, median time per "
         "call. Targets: separate / fused >= 1.6, copy / fused >= 0.85. fp8 (per-row scale) and q8_0 "
         "fused, for comparison.\n";
  if (markdown)
    out << "\n| shape | threads | fused int8 | forward + pass | copy | separate / fused | copy / fused | "
           "fused fp8 | fused q8_0 |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const QuantizedResult &r : results) {
    const double copy = std::min(r.copy_nontemporal.median, r.copy_ordinary.median);
    const double separate = r.forward_then_pass.median / r.fused_int8.median;
    const double of_copy = copy / r.fused_int8.median;
    const char *copy_kind = r.copy_nontemporal.median <= r.copy_ordinary.median ? "nt" : "ordinary";
    char line[512];
    std::snprintf(line, sizeof line,
                  markdown ? "| %lldx%lld f32 | %d | %.2f ms | %.2f ms | %.2f ms (%s) | %.2f %s | %.2f %s | %.2f ms | "
                             "%.2f ms |\n"
                           : "  %lldx%lld f32  t%d  fused %7.2f ms  forward+pass %7.2f ms  copy %7.2f ms (%s)  "
                             "separate/fused %.2f %s  copy/fused %.2f %s  fp8 %7.2f ms  q8_0 %7.2f ms\n",
                  (long long)r.rows, (long long)r.cols, r.threads, r.fused_int8.median * 1e3,
                  r.forward_then_pass.median * 1e3, copy * 1e3, copy_kind, separate, separate >= 1.6 ? "PASS" : "MISS",
                  of_copy, of_copy >= 0.85 ? "PASS" : "MISS", r.fused_fp8.median * 1e3, r.fused_q8_0.median * 1e3);
    out << line;
  }
}

}  // namespace rmsnorm_bench
