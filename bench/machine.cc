#include "machine.h"

#include <omp.h>

#include <fstream>
#include <sstream>

#include "cross_core.h"
#include "rmsnorm/rmsnorm.h"
#include "runtime/cache_info.h"
#include "stream.h"

namespace rmsnorm_bench {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

}  // namespace

MachineInfo DetectMachine() {
  MachineInfo m;
  m.cpu_model = CpuModel();
  m.hardware_threads = omp_get_num_procs();
  const rmsnorm::runtime::CacheSizes caches = rmsnorm::runtime::ReadCacheSizes();  // as the kernels read them
  m.l1d_bytes = caches.l1d;
  m.l2_bytes = caches.l2;
  m.l3_bytes = caches.l3;
  m.cpu_target = rmsnorm_cpu_target();
  m.stream_target = StreamTarget();
  m.library_version = rmsnorm_version();
  m.header_version = std::to_string(RMSNORM_VERSION_MAJOR) + "." + std::to_string(RMSNORM_VERSION_MINOR) + "." +
                     std::to_string(RMSNORM_VERSION_PATCH);
  m.load_average_1min = LoadAverage();
  m.cross_core_ns = CrossCoreRoundTripNs();
  return m;
}

double LoadAverage() {
  std::istringstream in(ReadFirstLine("/proc/loadavg"));
  double load = -1;
  if (!(in >> load)) return -1;
  return load;
}

bool MachineLooksBusy(const MachineInfo& machine, double load_average) {
  return load_average >= 0.5 * machine.hardware_threads;
}

const char* Residency(const MachineInfo& m, int64_t bytes, int threads) {
  if (m.l1d_bytes > 0 && bytes <= m.l1d_bytes * threads) return "L1";
  if (m.l2_bytes > 0 && bytes <= m.l2_bytes * threads) return "L2";
  if (m.l3_bytes > 0 && bytes <= m.l3_bytes) return "L3";
  return "DRAM";
}

std::string HumanBytes(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30) && bytes % (int64_t{1} << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (int64_t{1} << 20) && bytes % (int64_t{1} << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= (int64_t{1} << 10) && bytes % (int64_t{1} << 10) == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace rmsnorm_bench
