// The cache sizes rmsnorm-bench reports and the kernels plan with, read by the library's own sysfs parser
// (runtime/cache_info.cc), and the CPU vendor they plan with.
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "runtime/cache_info.h"

namespace {

TEST(CacheSizes, ReadFromSysfsInOrder) {
  if (access("/sys/devices/system/cpu/cpu0/cache/index0/size", R_OK) != 0)
    GTEST_SKIP() << "this system's sysfs lists no caches";
  const rmsnorm::runtime::CacheSizes caches = rmsnorm::runtime::ReadCacheSizes();
  // Every x86-64 and ARM64 core has an L1 data cache, and a size as sysfs writes it ("48K") parses.
  EXPECT_GE(caches.l1d, 4096);
  EXPECT_EQ(caches.l1d % 1024, 0);
  if (caches.l2 > 0) EXPECT_GT(caches.l2, caches.l1d);
  if (caches.l3 > 0) EXPECT_GT(caches.l3, caches.l2);
  // The last level is the highest one found, and the kernels' streaming threshold starts from it.
  const int64_t highest = caches.l3 > 0 ? caches.l3 : caches.l2 > 0 ? caches.l2 : caches.l1d;
  EXPECT_EQ(caches.last_level, highest);
  EXPECT_EQ(rmsnorm::runtime::LastLevelCacheBytes(), caches.last_level);
  // The L1d size that decides where the kernels' next-row prefetches go (RowPlan::prefetch_into_l1).
  EXPECT_EQ(rmsnorm::runtime::L1DataCacheBytes(), caches.l1d);
}

// The vendor that decides with it (RowPlan::prefetch_into_l1): CPUID's, which Linux reports too.
TEST(CacheSizes, CpuVendorAsLinuxReportsIt) {
#if !defined(__x86_64__) && !defined(__i386__)
  GTEST_SKIP() << "not x86: no CPUID vendor (and under qemu /proc/cpuinfo is the host's)";
#else
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, vendor;
  while (vendor.empty() && std::getline(cpuinfo, line))
    if (line.rfind("vendor_id", 0) == 0 && line.find(": ") != std::string::npos) vendor = line.substr(line.find(": ") + 2);
  if (vendor.empty()) GTEST_SKIP() << "/proc/cpuinfo names no vendor_id";
  EXPECT_EQ(rmsnorm::runtime::CpuIsAmd(), vendor == "AuthenticAMD") << "vendor_id " << vendor;
#endif
}

}  // namespace
