// Choosing the SIMD target: rmsnorm_set_cpu_target and RMSNORM_CPU_TARGET.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <string>

#include "rmsnorm/rmsnorm.h"
#include "test_util.h"

namespace rmsnorm::test {
namespace {

std::string Lower(std::string s) {
  for (char& ch : s) ch = char(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Restores the limit the process started with.
class CpuTarget : public ::testing::Test {
 protected:
  void TearDown() override { rmsnorm_set_cpu_target(std::getenv("RMSNORM_CPU_TARGET")); }
};

TEST_F(CpuTarget, EveryTargetByNameAndAutoForTheBest) {
  const std::vector<int64_t> targets = AvailableTargets();
  ASSERT_FALSE(targets.empty());
  for (int64_t target : targets) {
    const std::string name = TargetName(target);
    ASSERT_EQ(RMSNORM_OK, rmsnorm_set_cpu_target(name.c_str())) << rmsnorm_last_error();
    EXPECT_EQ(name, rmsnorm_cpu_target());
    ASSERT_EQ(RMSNORM_OK, rmsnorm_set_cpu_target(Lower(name).c_str())) << "names are case-insensitive";
    EXPECT_EQ(name, rmsnorm_cpu_target());
  }
  for (const char* best : {static_cast<const char*>(nullptr), "", "auto", "AUTO"}) {
    ASSERT_EQ(RMSNORM_OK, rmsnorm_set_cpu_target(best));
    EXPECT_EQ(TargetName(targets.front()), rmsnorm_cpu_target());
  }
}

// AVX3_BF16 (AVX3 with bf16 rounded by AVX512_BF16's instruction) is a name of every build that has
// AVX3, above it: a CPU without that extension, or without AVX-512, gets the best target it has.
TEST_F(CpuTarget, Avx3Bf16GivesTheBestTargetAtOrBelowIt) {
  if (rmsnorm_set_cpu_target("AVX3") != RMSNORM_OK) {
    EXPECT_EQ(RMSNORM_ERROR_INVALID_ARGUMENT, rmsnorm_set_cpu_target("AVX3_BF16")) << "named only beside AVX3";
    GTEST_SKIP() << "a build without AVX3 (ARM, x86 sanitizer builds)";
  }
  EXPECT_NE(std::string("AVX3_BF16"), rmsnorm_cpu_target()) << "AVX3 rounds bf16 in software";
  ASSERT_EQ(RMSNORM_OK, rmsnorm_set_cpu_target("avx3_bf16")) << rmsnorm_last_error();
  EXPECT_EQ(TargetName(AvailableTargets().front()), rmsnorm_cpu_target());
}

TEST_F(CpuTarget, UnknownNamesAreRefusedAndChangeNothing) {
  ASSERT_EQ(RMSNORM_OK, rmsnorm_set_cpu_target(TargetName(AvailableTargets().back()).c_str()));
  const std::string before = rmsnorm_cpu_target();
  for (const char* bad : {"AVX9", "avx2 ", "x", "AVX3_ZEN9"}) {
    EXPECT_EQ(RMSNORM_ERROR_INVALID_ARGUMENT, rmsnorm_set_cpu_target(bad)) << bad;
    EXPECT_NE(std::string::npos, std::string(rmsnorm_last_error()).find("unknown CPU target")) << rmsnorm_last_error();
    EXPECT_EQ(before, rmsnorm_cpu_target());
  }
}

// Run by ctest with RMSNORM_CPU_TARGET set to a target every CPU of the architecture has (SSE4, NEON).
TEST_F(CpuTarget, FollowsTheEnvironment) {
  const char* env = std::getenv("RMSNORM_CPU_TARGET");
  if (env == nullptr) GTEST_SKIP() << "RMSNORM_CPU_TARGET is not set";
  EXPECT_EQ(std::string(env), rmsnorm_cpu_target());
}

}  // namespace
}  // namespace rmsnorm::test
