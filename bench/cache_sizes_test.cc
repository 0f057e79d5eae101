// The cache sizes rmsnorm-bench reports and the kernels plan with, read by the library's own sysfs parser
// (runtime/cache_info.cc).
#include <unistd.h>

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

}  // namespace
