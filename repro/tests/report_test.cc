// The report: results.json holds one object per task and norm with the keys the issue names, and the
// summary's time comparison pairs chunks of the same round.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "train/report.h"

namespace repro {
namespace {

VariantResult fake_variant(NormKind norm, double seconds_per_step) {
  VariantResult v;
  v.norm = norm;
  v.steps_done = 4;
  v.losses = {4.0, 3.0, 2.5, 2.0};
  v.chunk_steps = {2, 2};
  // The second round ran under load that slowed both variants alike: pairing cancels it.
  v.chunk_seconds = {2 * seconds_per_step, 2 * 3 * seconds_per_step};
  v.chunk_cpu_seconds = v.chunk_seconds;
  v.chunk_norm_seconds = {0.1 * v.chunk_seconds[0], 0.1 * v.chunk_seconds[1]};
  v.metric = norm == NormKind::kLayerNorm ? 2.0 : 1.9;
  return v;
}

TaskResult fake_task() {
  TaskResult r;
  r.info.name = "fake-task";
  r.info.title = "A fake task's title";
  r.info.metric = "valid bpc";
  r.info.loss_unit = "bits/char";
  r.info.steps = 4;
  r.info.chunk = 2;
  r.seed = 1;
  r.variants = {fake_variant(NormKind::kLayerNorm, 0.010), fake_variant(NormKind::kRmsNorm, 0.009)};
  return r;
}

TEST(Report, SummaryPairsRoundsAndComparesWithLayerNorm) {
  const std::vector<NormSummary> rows = summarize({fake_task()});
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_NEAR(rows[1].time_saved_vs_layernorm, 0.1, 1e-12);  // 9 ms against 10 ms in both rounds
  EXPECT_NEAR(rows[1].metric_vs_layernorm, -0.05, 1e-12);
  EXPECT_NEAR(rows[0].time_saved_vs_layernorm, 0.0, 1e-12);
  EXPECT_NEAR(rows[1].norm_share_mean, 0.1, 1e-12);
}

TEST(Report, WritesResultsJsonWithTheIssuesKeys) {
  const std::string dir = testing::TempDir() + "repro_report_test_" + std::to_string(getpid());
  RunInfo run;
  run.mode = "test";
  run.threads = 1;
  write_report(dir, run, {{fake_task()}});
  std::ifstream in(dir + "/results.json");
  ASSERT_TRUE(in) << "no results.json in " << dir;
  std::stringstream json;
  json << in.rdbuf();
  const std::string text = json.str();
  EXPECT_EQ(text.front(), '[');
  for (const char* key : {"\"task\": \"fake-task\"", "\"norm\": \"layernorm\"", "\"norm\": \"rmsnorm\"",
                          "\"metric\": \"valid bpc\"", "\"value\": 1.9", "\"lower_is_better\": true",
                          "\"seconds_per_1k_steps\": "})
    EXPECT_NE(text.find(key), std::string::npos) << key << " missing from " << text;
  EXPECT_TRUE(std::ifstream(dir + "/report.md").good());
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST(Report, TranslationColumnsJsonKeysAndOutputs) {
  TaskResult task = fake_task();
  task.info.name = "fake-translation";
  task.info.metric = "test BLEU";
  task.info.secondary_metric = "chrF";
  task.references = {"Das ist gut.", "Hallo Welt"};
  task.variants[0].secondary_metric = 30.0;
  task.variants[1].secondary_metric = 31.5;
  task.variants[1].p_value_vs_layernorm = 0.02;  // LayerNorm keeps NaN: it is the baseline
  task.variants[0].outputs = {"Das ist gut.", "Hallo"};
  task.variants[1].outputs = {"Das gut.", "Hallo Welt"};
  const std::vector<NormSummary> rows = summarize({task});
  EXPECT_EQ(rows[1].significant_seeds, 1);
  EXPECT_EQ(rows[0].significant_seeds, 0);
  const std::string table = format_table(task.info, rows);
  EXPECT_NE(table.find("chrF"), std::string::npos) << table;
  EXPECT_NE(table.find("31.50"), std::string::npos) << table;
  EXPECT_NE(table.find("0.020 *"), std::string::npos) << table;

  const std::string dir = testing::TempDir() + "repro_report_translation_" + std::to_string(getpid());
  RunInfo run;
  run.mode = "test";
  run.threads = 1;
  write_report(dir, run, {{task}});
  std::stringstream json, rmsnorm_out;
  json << std::ifstream(dir + "/results.json").rdbuf();
  for (const char* key : {"\"secondary_metric\": \"chrF\"", "\"secondary_value\": 31.5",
                          "\"p_values_vs_layernorm\": [0.02]", "\"p_values_vs_layernorm\": [null]",
                          "\"significant_seeds_vs_layernorm\": 1"})
    EXPECT_NE(json.str().find(key), std::string::npos) << key << " missing from " << json.str();
  rmsnorm_out << std::ifstream(dir + "/fake-translation_seed1_rmsnorm.txt").rdbuf();
  EXPECT_EQ(rmsnorm_out.str(), "Das gut.\nHallo Welt\n");
  EXPECT_TRUE(std::ifstream(dir + "/fake-translation_references.txt").good());
  std::system(("rm -rf '" + dir + "'").c_str());
}

}  // namespace
}  // namespace repro
