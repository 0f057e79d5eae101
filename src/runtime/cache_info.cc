#include "runtime/cache_info.h"

#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace rmsnorm::runtime {
namespace {

// "32768K" or "32M" from /sys/devices/system/cpu/cpu0/cache/indexN/size.
int64_t ParseSize(const std::string& text) {
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (value <= 0) return 0;
  const char unit = end ? *end : '\0';
  return value * (unit == 'K' ? 1024LL : unit == 'M' ? 1024LL * 1024 : unit == 'G' ? 1024LL * 1024 * 1024 : 1);
}

std::string ReadLine(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  char buffer[64] = {};
  const bool ok = std::fgets(buffer, sizeof buffer, f) != nullptr;
  std::fclose(f);
  return ok ? buffer : "";
}

// The sysfs figure where there is one, else sysconf's (sysconf_name < 0: none), else the default.
int64_t SizeOrFallback(int64_t sysfs, int sysconf_name, int64_t default_bytes) {
  if (sysfs > 0) return sysfs;
  const long reported = sysconf_name >= 0 ? sysconf(sysconf_name) : -1;
  return reported > 0 ? int64_t(reported) : default_bytes;
}

// sysfs is scanned once per process for the sizes the kernels plan with.
const CacheSizes& CachedSizes() {
  static const CacheSizes sizes = ReadCacheSizes();
  return sizes;
}

#ifdef _SC_LEVEL3_CACHE_SIZE
constexpr int kSysconfLevel3 = _SC_LEVEL3_CACHE_SIZE;
#else
constexpr int kSysconfLevel3 = -1;
#endif
#ifdef _SC_LEVEL1_DCACHE_SIZE
constexpr int kSysconfLevel1Data = _SC_LEVEL1_DCACHE_SIZE;
#else
constexpr int kSysconfLevel1Data = -1;
#endif

// The smallest L1d whose AMD CPUs take the next-row prefetches into L1 (PrefetchIntoL1).
constexpr int64_t kPrefetchIntoL1MinBytes = int64_t{48} << 10;

}  // namespace

CacheSizes ReadCacheSizes() {
  CacheSizes sizes;
  int last_level = 0;
  for (int index = 0; index < 8; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/";
    const int level = std::atoi(ReadLine(dir + "level").c_str());
    const int64_t size = ParseSize(ReadLine(dir + "size"));
    if (level == 1 && ReadLine(dir + "type").rfind("Data", 0) == 0) sizes.l1d = size;
    if (level == 2) sizes.l2 = size;
    if (level == 3) sizes.l3 = size;
    if (level > last_level && size > 0) {
      last_level = level;
      sizes.last_level = size;
    }
  }
  return sizes;
}

int64_t LastLevelCacheBytes() {
  static const int64_t bytes = SizeOrFallback(CachedSizes().last_level, kSysconfLevel3, int64_t{32} << 20);
  return bytes;
}

int64_t L1DataCacheBytes() {
  static const int64_t bytes = SizeOrFallback(CachedSizes().l1d, kSysconfLevel1Data, int64_t{32} << 10);
  return bytes;
}

bool CpuIsAmd() {
  static const bool amd = [] {
#if defined(__x86_64__) || defined(__i386__)
    unsigned max_leaf = 0, ebx = 0, ecx = 0, edx = 0;
    if (__get_cpuid(0, &max_leaf, &ebx, &ecx, &edx) == 0) return false;
    char vendor[12];  // EBX, EDX, ECX
    std::memcpy(vendor, &ebx, 4);
    std::memcpy(vendor + 4, &edx, 4);
    std::memcpy(vendor + 8, &ecx, 4);
    return std::memcmp(vendor, "AuthenticAMD", 12) == 0;
#else
    return false;
#endif
  }();
  return amd;
}

bool PrefetchIntoL1() {
  static const bool into_l1 = [] {
    if (const char* env = std::getenv("RMSNORM_PREFETCH_INTO_L1")) {
      if (std::strcmp(env, "1") == 0) return true;
      if (std::strcmp(env, "0") == 0) return false;
    }
    return CpuIsAmd() && L1DataCacheBytes() >= kPrefetchIntoL1MinBytes;
  }();
  return into_l1;
}

int64_t StreamingStoreBytes() {
  static const int64_t bytes = [] {
    if (const char* env = std::getenv("RMSNORM_STREAM_BYTES")) return int64_t(std::strtoll(env, nullptr, 10));
    return LastLevelCacheBytes() / 4;
  }();
  return bytes;
}

}  // namespace rmsnorm::runtime
