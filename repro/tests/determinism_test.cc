// A fixed seed gives the same loss curve twice: every task, every norm, through the same interleaved
// trainer the demo runs (at the tiny scale). A different seed gives a different curve.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "common/blas.h"
#include "data/missing_data.h"
#include "rmsnorm/rmsnorm.hpp"
#include "train/interleaved.h"
#include "train/tasks.h"

namespace repro {
namespace {

class Determinism : public testing::TestWithParam<std::string> {};

TEST_P(Determinism, SameSeedSameLossCurve) {
  set_blas_threads(2);
  rmsnorm::set_num_threads(2);
  const std::string cache = testing::TempDir() + "repro_determinism_kjv_" + std::to_string(getpid()) + ".txt";
  Datasets data(KjvSource{"/usr/bin/bible", "/usr/lib/bible.data", cache}, kFashionMnistDir);
  std::unique_ptr<Task> task;
  try {
    task = make_task(GetParam(), Scale::kTiny, data);
  } catch (const MissingData& e) {
    GTEST_SKIP() << e.what();
  }
  const TaskResult a = train_interleaved(*task, all_norms(), 5);
  const TaskResult b = train_interleaved(*task, all_norms(), 5);
  const TaskResult other = train_interleaved(*task, all_norms(), 6);
  std::remove(cache.c_str());
  ASSERT_EQ(a.variants.size(), 5u);
  for (size_t v = 0; v < a.variants.size(); ++v) {
    SCOPED_TRACE(norm_name(a.variants[v].norm));
    ASSERT_EQ(a.variants[v].losses.size(), static_cast<size_t>(task->info().steps));
    EXPECT_EQ(a.variants[v].losses, b.variants[v].losses);  // bit for bit
    EXPECT_EQ(a.variants[v].metric, b.variants[v].metric);
    EXPECT_NE(a.variants[v].losses, other.variants[v].losses);
  }
  // The norms differ from each other: the run-time choice reaches the model.
  EXPECT_NE(a.variants[1].losses, a.variants[3].losses);  // layernorm, rmsnorm
  EXPECT_NE(a.variants[3].losses, a.variants[4].losses);  // rmsnorm, prmsnorm
}

INSTANTIATE_TEST_SUITE_P(Tasks, Determinism, testing::ValuesIn(task_names()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           for (char& c : name)
                             if (c == '-') c = '_';
                           return name;
                         });

}  // namespace
}  // namespace repro
