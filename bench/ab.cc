// rmsnorm-ab: two builds of the library side by side in one process, for a change's speed-up.
//
//   rmsnorm-ab LIB_A[@TARGET] LIB_B[@TARGET] OP DTYPE ROWSxCOLS [THREADS [ROUNDS [CALLS [OFFSET]]]]
//     OP: fwd | bwd | prmsnorm_fwd | prmsnorm_bwd (partial 0.0625, as rmsnorm-bench's pRMSNorm) |
//     layernorm_fwd | layernorm_bwd | fwd_int8 | fwd_fp8 | fwd_q8_0 (the forward with quantized outputs:
//     INT8_ROW, FP8_E4M3_ROW, Q8_0); DTYPE: f32 | bf16 | f16
//     @TARGET limits that library's kernels to a SIMD target (rmsnorm_set_cpu_target): two targets of
//     one build compare as two copies of its file, since dlopen gives one path one instance.
//     OFFSET: bytes past a page where every tensor starts (a multiple of the dtype's size below 4096; the
//     f32 gain and bias at it rounded down to 4), as a std::vector (16) or a NumPy array lies; 0 by default.
//
// Each library is loaded with dlopen (RTLD_LOCAL | RTLD_DEEPBIND, so each binds its own symbols) and
// called on the same inputs, writing the same output buffers: two output buffers measured a few percent
// apart whichever library wrote them (docs/perf-log.md, session 22). Every round takes each
// library's best of CALLS calls, the two in turn and in alternating order; the report is the median of
// the rounds' time ratios A / B (above 1: B is faster), and whether the two wrote the same bytes.
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cases.h"
#include "rmsnorm/rmsnorm.h"
#include "tensor.h"
#include "timing.h"

namespace {

struct Library {
  decltype(&rmsnorm_config_init) config_init;
  decltype(&rmsnorm_forward) forward;
  decltype(&rmsnorm_backward) backward;
  decltype(&rmsnorm_layernorm_forward) layernorm_forward;
  decltype(&rmsnorm_layernorm_backward) layernorm_backward;
  decltype(&rmsnorm_forward_quantized) forward_quantized;
  decltype(&rmsnorm_set_num_threads) set_num_threads;
  decltype(&rmsnorm_last_error) last_error;
  decltype(&rmsnorm_cpu_target) cpu_target;
  void* handle;
  std::string suffix;  // LIB@TARGET's "@TARGET", or empty
};

template <class F>
void Find(void* handle, const char* path, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(handle, name));
  if (*fn == nullptr) {
    std::fprintf(stderr, "rmsnorm-ab: %s has no %s\n", path, name);
    std::exit(1);
  }
}

// LIB or LIB@TARGET.
Library Load(const std::string& arg) {
  const size_t at = arg.rfind('@');
  const std::string file = arg.substr(0, at);
  const char* path = file.c_str();
  void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
  if (handle == nullptr) {
    std::fprintf(stderr, "rmsnorm-ab: %s\n", dlerror());
    std::exit(1);
  }
  Library lib;
  lib.handle = handle;
  if (at != std::string::npos) lib.suffix = arg.substr(at);
  Find(handle, path, "rmsnorm_config_init", &lib.config_init);
  Find(handle, path, "rmsnorm_forward", &lib.forward);
  Find(handle, path, "rmsnorm_backward", &lib.backward);
  Find(handle, path, "rmsnorm_layernorm_forward", &lib.layernorm_forward);
  Find(handle, path, "rmsnorm_layernorm_backward", &lib.layernorm_backward);
  Find(handle, path, "rmsnorm_forward_quantized", &lib.forward_quantized);
  Find(handle, path, "rmsnorm_set_num_threads", &lib.set_num_threads);
  Find(handle, path, "rmsnorm_last_error", &lib.last_error);
  Find(handle, path, "rmsnorm_cpu_target", &lib.cpu_target);
  if (!lib.suffix.empty()) {
    decltype(&rmsnorm_set_cpu_target) set_cpu_target;
    Find(handle, path, "rmsnorm_set_cpu_target", &set_cpu_target);
    if (set_cpu_target(lib.suffix.c_str() + 1) != RMSNORM_OK) {
      std::fprintf(stderr, "rmsnorm-ab: %s\n", lib.last_error());
      std::exit(1);
    }
  }
  return lib;
}

int Usage() {
  std::fprintf(stderr,
               "usage: rmsnorm-ab LIB_A[@TARGET] LIB_B[@TARGET] OP DTYPE ROWSxCOLS [THREADS [ROUNDS [CALLS [OFFSET]]]]\n"
               "  OP: fwd | bwd | prmsnorm_fwd | prmsnorm_bwd | layernorm_fwd | layernorm_bwd | fwd_int8 | fwd_fp8 | fwd_q8_0;\n"
               "  DTYPE: f32 | bf16 | f16\n"
               "  @TARGET: that library's kernels limited to a SIMD target (AVX2, ...); give the second\n"
               "  of two targets of one build a copy of its file\n"
               "  OFFSET: bytes past a page where every tensor starts (default 0)\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using rmsnorm_bench::NowSeconds;
  using rmsnorm_bench::Summarize;
  using rmsnorm_bench::Tensor;
  if (argc < 6 || argc > 10) return Usage();
  // pRMSNorm runs as the forward or backward with rmsnorm-bench's partial.
  const std::string op_name = argv[3], dtype_name = argv[4];
  const bool partial = op_name == "prmsnorm_fwd" || op_name == "prmsnorm_bwd";
  const std::string op = partial ? op_name.substr(std::string("prmsnorm_").size()) : op_name;
  // The quantized forwards' format, or 0 for the other ops.
  const int quant_format = op == "fwd_int8"   ? RMSNORM_QUANT_INT8_ROW
                           : op == "fwd_fp8"  ? RMSNORM_QUANT_FP8_E4M3_ROW
                           : op == "fwd_q8_0" ? RMSNORM_QUANT_Q8_0
                                              : 0;
  if (op != "fwd" && op != "bwd" && op != "layernorm_fwd" && op != "layernorm_bwd" && quant_format == 0)
    return Usage();
  rmsnorm_dtype dtype;
  if (dtype_name == "f32") {
    dtype = RMSNORM_F32;
  } else if (dtype_name == "bf16") {
    dtype = RMSNORM_BF16;
  } else if (dtype_name == "f16") {
    dtype = RMSNORM_F16;
  } else {
    return Usage();
  }
  long long rows = 0, cols = 0;
  if (std::sscanf(argv[5], "%lldx%lld", &rows, &cols) != 2 || rows < 1 || cols < 1) return Usage();
  const int threads = argc > 6 ? std::atoi(argv[6]) : 2;
  const int rounds = argc > 7 ? std::atoi(argv[7]) : 30;
  const int calls = argc > 8 ? std::atoi(argv[8]) : 5;
  const long long offset = argc > 9 ? std::atoll(argv[9]) : 0;
  if (threads < 1 || rounds < 1 || calls < 1) return Usage();
  const size_t element_size = rmsnorm_bench::DtypeSize(dtype);
  if (offset < 0 || offset >= 4096 || offset % static_cast<long long>(element_size) != 0) return Usage();
  const size_t skip = static_cast<size_t>(offset) / element_size;  // elements before each tensor's start

  Library libs[2] = {Load(argv[1]), Load(argv[2])};
  // One file loaded twice is one instance, whose target the second load would set for both.
  if (libs[0].handle == libs[1].handle && libs[0].suffix != libs[1].suffix) {
    std::fprintf(stderr, "rmsnorm-ab: LIB_A and LIB_B are one file, so one instance with one target: copy the file for the second\n");
    return 1;
  }
  for (Library& lib : libs) lib.set_num_threads(threads);
  const size_t row_count = static_cast<size_t>(rows), col_count = static_cast<size_t>(cols);
  const size_t n = row_count * col_count;
  Tensor x_storage(dtype, n + skip), dy_storage(dtype, n + skip), out_storage(dtype, n + skip);
  x_storage.FillRandom(1);
  dy_storage.FillRandom(2);
  Tensor weight(RMSNORM_F32, col_count + skip), bias(RMSNORM_F32, col_count + skip);
  weight.FillRandom(3);
  bias.FillRandom(4);
  const auto at_offset = [&](Tensor& t, long long bytes) { return static_cast<char*>(t.data()) + bytes; };
  void* const x = at_offset(x_storage, offset);
  void* const dy = at_offset(dy_storage, offset);
  void* const out = at_offset(out_storage, offset);
  // q is a byte per element (Q8_0: 34 bytes per 32), which the output tensor's storage holds.
  const size_t out_bytes = quant_format == RMSNORM_QUANT_Q8_0 ? n / 32 * 34 : quant_format != 0 ? n : n * element_size;
  std::vector<float> scales(row_count);
  std::vector<float> mean(row_count), rstd(row_count), dweight(col_count), dbias(col_count);
  // The f32 gain and bias at the same offset, rounded down to their own elements.
  const auto* w = reinterpret_cast<const float*>(at_offset(weight, offset / 4 * 4));
  const auto* b = reinterpret_cast<const float*>(at_offset(bias, offset / 4 * 4));

  rmsnorm_config config = libs[0].config_init(rows, cols);
  config.dtype = dtype;
  if (partial) config.partial = rmsnorm_bench::kPartial;
  // rmsnorm_config_ex_init's packed rows, without its call into a library this program does not link.
  rmsnorm_config_ex config_ex;
  std::memset(&config_ex, 0, sizeof config_ex);
  config_ex.struct_size = sizeof config_ex;
  config_ex.base = config;
  // The backwards take the statistics their forward saved (A's; both libraries compute the same bits).
  const bool layernorm = op.rfind("layernorm", 0) == 0;
  const rmsnorm_status saved = layernorm
                                   ? libs[0].layernorm_forward(&config, x, w, b, out, mean.data(), rstd.data())
                                   : libs[0].forward(&config, x, w, nullptr, out, rstd.data());
  if (saved != RMSNORM_OK) {
    std::fprintf(stderr, "rmsnorm-ab: %s\n", libs[0].last_error());
    return 1;
  }
  const auto call = [&](Library& lib) {
    rmsnorm_status status;
    if (op == "fwd") {
      status = lib.forward(&config, x, w, nullptr, out, rstd.data());
    } else if (op == "bwd") {
      status = lib.backward(&config, dy, x, w, rstd.data(), out, dweight.data(), nullptr);
    } else if (quant_format != 0) {
      status = lib.forward_quantized(&config_ex, rmsnorm_quant_format(quant_format), x, w, nullptr, out,
                                     quant_format == RMSNORM_QUANT_Q8_0 ? nullptr : scales.data(), rstd.data());
    } else if (op == "layernorm_fwd") {
      status = lib.layernorm_forward(&config, x, w, b, out, mean.data(), rstd.data());
    } else {
      status = lib.layernorm_backward(&config, dy, x, w, mean.data(), rstd.data(), out,
                                      dweight.data(), dbias.data());
    }
    if (status != RMSNORM_OK) {
      std::fprintf(stderr, "rmsnorm-ab: %s\n", lib.last_error());
      std::exit(1);
    }
  };

  // Whether B writes A's bytes: the main output, and the backwards' dweight and the quantized scales.
  call(libs[0]);
  const std::vector<char> out_a(static_cast<const char*>(out), static_cast<const char*>(out) + out_bytes);
  const std::vector<float> dweight_a = dweight, scales_a = scales;
  call(libs[1]);
  const bool same = std::memcmp(out_a.data(), out, out_bytes) == 0 &&
                    std::memcmp(dweight_a.data(), dweight.data(), dweight.size() * sizeof(float)) == 0 &&
                    std::memcmp(scales_a.data(), scales.data(), scales.size() * sizeof(float)) == 0;

  std::vector<double> time[2], ratio;
  for (int round = 0; round < rounds; ++round) {
    double best[2];
    for (int turn = 0; turn < 2; ++turn) {
      const int which = round % 2 == 0 ? turn : 1 - turn;
      best[which] = 1e300;
      for (int i = 0; i < calls; ++i) {
        const double start = NowSeconds();
        call(libs[which]);
        best[which] = std::min(best[which], (NowSeconds() - start) * 1e6);
      }
    }
    time[0].push_back(best[0]);
    time[1].push_back(best[1]);
    ratio.push_back(best[0] / best[1]);
  }
  const auto a_stats = Summarize(time[0], calls), b_stats = Summarize(time[1], calls);
  const auto ratio_stats = Summarize(ratio, calls);
  std::printf("%s %s %lldx%lld, %d thread%s: A %.2f us (%s), B %.2f us (%s) (medians of each round's best of %d); "
              "A / B %.3f (quartiles %.3f-%.3f, %d rounds); outputs %s; tensors %lld bytes past a page\n",
              op_name.c_str(), dtype_name.c_str(), rows, cols, threads, threads == 1 ? "" : "s", a_stats.median,
              libs[0].cpu_target(), b_stats.median, libs[1].cpu_target(), calls, ratio_stats.median, ratio_stats.p25,
              ratio_stats.p75, rounds, same ? "the same bytes" : "DIFFER", offset);
  return 0;
}
