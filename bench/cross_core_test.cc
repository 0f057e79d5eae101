// The cross-core probe names where the host put the pool's threads beside every multi-thread target,
// so it must measure a trip that took place and say it as the report prints it.
#include <gtest/gtest.h>

#include <omp.h>

#include <chrono>
#include <cmath>

#include "cross_core.h"

namespace rmsnorm_bench {
namespace {

TEST(CrossCore, RoundTripTakesPlace) {
  const auto start = std::chrono::steady_clock::now();
  const double ns = CrossCoreRoundTripNs();
  const std::chrono::duration<double> elapsed = std::chrono::steady_clock::now() - start;
  if (omp_get_num_procs() < 2) {
    EXPECT_TRUE(std::isnan(ns));
    return;
  }
  // A line's two trips between cores take tens of nanoseconds at least. With other work on the
  // cores a trip can wait for a time slice (over a millisecond with two busy loops beside it on this
  // project's 2-core VMs), so there is no upper bound on a trip; there is one on the probe, which
  // stops at its budget of 20 ms plus the trip under way.
  EXPECT_TRUE(std::isfinite(ns));
  EXPECT_GT(ns, 1.0);
  EXPECT_LT(elapsed.count(), 1.0);
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
