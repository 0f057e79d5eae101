#include "machine.h"

#include <omp.h>

#include <fstream>
#include <sstream>

#include "cross_core.h"
#include "rmsnorm/rmsnorm.h"
#include "stream.h"

namespace rmsnorm_bench {
namespace {

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// "32K", "512K", "32768K", "1M" as sysfs writes cache sizes.
int64_t ParseCacheSize(const std::string& text) {
  if (text.empty()) return 0;
  int64_t value = 0;
  size_t i = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') value = value * 10 + (text[i++] - '0');
  if (i < text.size() && (text[i] == 'K' || text[i] == 'k')) value <<= 10;
  if (i < text.size() && (text[i] == 'M' || text[i] == 'm')) value <<= 20;
  return value;
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
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const std::string level = ReadFirstLine(dir + "level");
    if (level.empty()) break;
    const std::string type = ReadFirstLine(dir + "type");
    const int64_t size = ParseCacheSize(ReadFirstLine(dir + "size"));
    if (level == "1" && type == "Data") m.l1d_bytes = size;
    if (level == "2") m.l2_bytes = size;
    if (level == "3") m.l3_bytes = size;
  }
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
