// The cross-core probe names where the host put the pool's threads beside every multi-thread target,
// so it must measure a trip that took place and say it as the report prints it.
#include <gtest/gtest.h>

#include <omp.h>

#include <cmath>

#include "cross_core.h"

namespace rmsnorm_bench {
namespace {

TEST(CrossCore, RoundTripTakesPlace) {
  const double ns = CrossCoreRoundTripNs();
  if (omp_get_num_procs() < 2) {
    EXPECT_TRUE(std::isnan(ns));
    return;
  }
  // A line's two trips between cores take tens of nanoseconds at least and, with both threads
  // spinning, well under a millisecond even on a loaded machine.
  EXPECT_GT(ns, 1.0);
  EXPECT_LT(ns, 1e6);
}

TEST(CrossCore, Text) {
  const double nan = std::nan("");
  EXPECT_EQ(CrossCoreText(nan, nan), "");
  EXPECT_EQ(CrossCoreText(80.0, nan), "cross-core round trip 80 ns");
  EXPECT_EQ(CrossCoreText(nan, 352.4), "cross-core round trip 352 ns");
  EXPECT_EQ(CrossCoreText(80.0, 90.0), "cross-core round trip 85 ns");  // within a quarter: one figure
  EXPECT_EQ(CrossCoreText(352.0, 81.0), "cross-core round trip 81-352 ns");
}

}  // namespace
}  // namespace rmsnorm_bench
