// What the numbers were measured on: CPU model, caches, threads, SIMD targets, library version.
#ifndef RMSNORM_BENCH_MACHINE_H_
#define RMSNORM_BENCH_MACHINE_H_

#include <cstdint>
#include <limits>
#include <string>

namespace rmsnorm_bench {

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name", or "unknown"
  int hardware_threads = 1;
  // Per instance; 0 when the OS does not say. L1d and L2 are per core here, L3 shared.
  int64_t l1d_bytes = 0, l2_bytes = 0, l3_bytes = 0;
  std::string cpu_target;     // rmsnorm_cpu_target(): what the kernels run
  std::string stream_target;  // what the stream loops run
  std::string library_version;
  std::string header_version;
  double load_average_1min = -1;  // /proc/loadavg at start; -1 when unknown
  // CrossCoreRoundTripNs() at start (cross_core.h); NaN for one hardware thread.
  double cross_core_ns = std::numeric_limits<double>::quiet_NaN();
};

MachineInfo DetectMachine();

// /proc/loadavg's 1-minute figure; -1 when unknown.
double LoadAverage();

// A load average at or above half the hardware threads means other work shares the cores: timings
// then include waits for the scheduler (multi-thread ones above all, since every thread must run).
bool MachineLooksBusy(const MachineInfo& machine, double load_average);

// The smallest cache level that holds `bytes` when `threads` cores share the work: "L1", "L2", "L3"
// or "DRAM" (private levels count once per thread). Approximate: it ignores what else is cached.
const char* Residency(const MachineInfo& machine, int64_t bytes, int threads);

std::string HumanBytes(int64_t bytes);  // "32 MiB"

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_MACHINE_H_
