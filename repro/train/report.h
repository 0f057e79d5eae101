// The report of a run: the table in the paper's form (printed and in report.md), results.json, and
// PNG plots of the training loss against steps and against seconds per task (drawn by gnuplot).
#ifndef RMSNORM_REPRO_TRAIN_REPORT_H_
#define RMSNORM_REPRO_TRAIN_REPORT_H_

#include <string>
#include <vector>

#include "train/interleaved.h"

namespace repro {

struct RunInfo {
  std::string mode;          // "demo", "repro", ...
  std::string command_line;
  int threads = 0;           // OpenBLAS and rmsnorm threads, the same for every variant
  int jobs = 1;              // tasks trained at once, each in its own thread
  std::string blas;          // OpenBLAS's configuration string
  std::string cpu_target;    // rmsnorm's SIMD target
  std::string library_version;
  double wall_seconds = 0.0;
};

// One task's results over seeds, summarized per norm.
struct NormSummary {
  NormKind norm = NormKind::kNone;
  float partial = 1.0f;
  int seeds = 0, diverged = 0;
  double metric_mean = 0, metric_std = 0;  // over the seeds that did not diverge
  std::vector<double> metrics;             // per seed (NaN where diverged)
  double seconds_per_1k_mean = 0, seconds_per_1k_std = 0;
  double norm_seconds_per_1k_mean = 0;
  double norm_share_mean = 0;
  double time_saved_vs_layernorm = 0;      // 1 - paired_time_ratio(this, LayerNorm), mean over seeds
  double cpu_time_saved_vs_layernorm = 0;  // the same with process CPU time
  double metric_vs_layernorm = 0;          // metric / LayerNorm's metric - 1
  double secondary_mean = 0, secondary_std = 0;  // the task's second metric (chrF), NaN when none
  std::vector<double> secondary_values;          // per seed
  std::vector<double> p_values;                  // per seed: the task's significance test against LayerNorm
  int significant_seeds = 0;                     // seeds with p < 0.05
};
std::vector<NormSummary> summarize(const std::vector<TaskResult>& seeds_of_one_task);

// The table for one task, in the paper's form, as fixed-width text (with a header line if asked).
std::string format_table(const TaskInfo& info, const std::vector<NormSummary>& rows, bool header = true);

// Writes dir/report.md, dir/results.json, and per task the curve data, the gnuplot script and the PNGs.
// results: [task][seed]. Returns false (after a warning on stderr) if the plots could not be drawn.
bool write_report(const std::string& dir, const RunInfo& run, const std::vector<std::vector<TaskResult>>& results);

}  // namespace repro

#endif  // RMSNORM_REPRO_TRAIN_REPORT_H_
