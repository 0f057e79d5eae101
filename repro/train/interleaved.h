// Trains every norm of a task in one process, interleaved: each variant in turn runs a chunk of steps,
// and the order rotates every round. All variants share the threads, the steps, the batches and the
// machine's load over time, so their timings compare fairly.
#ifndef RMSNORM_REPRO_TRAIN_INTERLEAVED_H_
#define RMSNORM_REPRO_TRAIN_INTERLEAVED_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "common/norm_layer.h"
#include "train/task.h"

namespace repro {

struct VariantResult {
  NormKind norm = NormKind::kNone;
  float partial = 1.0f;
  int64_t parameters = 0;
  int64_t steps_done = 0;
  bool diverged = false;             // a loss or gradient became NaN/infinite: training stopped
  double metric = 0.0;               // the task's metric after training (NaN if diverged)
  double secondary_metric = std::numeric_limits<double>::quiet_NaN();  // the task's second metric, if any
  double p_value_vs_layernorm = std::numeric_limits<double>::quiet_NaN();  // the task's significance test, if any
  std::vector<std::string> outputs;  // the variant's outputs() after training (test translations), if any
  std::vector<double> losses;        // (steps_done) training loss per step, in the task's loss unit
  std::vector<int64_t> chunk_steps;  // steps in each chunk this variant ran
  std::vector<double> chunk_seconds; // wall time of each chunk: forward, backward and update
  std::vector<double> chunk_norm_seconds;  // of which inside normalization
  std::vector<double> chunk_cpu_seconds;   // CPU time of each chunk (see CpuClock)
  double train_seconds() const;
  double norm_seconds() const;
  // Median over chunks of seconds per step, times 1000: robust to bursts of load from other processes.
  double seconds_per_1k_steps() const;
  double norm_seconds_per_1k_steps() const;  // the same median statistic for the time inside norms
  double norm_share() const;                 // norm_seconds / train_seconds
};

// Median over rounds of a's per-step time over b's in the same round. Variants of a round run back to
// back, so the ratio cancels load that changes slowly over the run (other processes, clock speed).
// With cpu, the ratio of process CPU times: with one thread, the time this process computed, whatever
// other processes did to its wall time.
double paired_time_ratio(const VariantResult& a, const VariantResult& b, bool cpu = false);

struct TaskResult {
  TaskInfo info;
  uint64_t seed = 0;
  std::vector<std::string> references;  // the task's references(), if any
  std::vector<VariantResult> variants;
};

// Called after each round: the task, steps done, total steps, the variants so far.
using ProgressFn = std::function<void(const TaskInfo&, int64_t, const std::vector<VariantResult>&)>;

// Whose CPU time chunk_cpu_seconds counts. The process's covers the BLAS and rmsnorm threads; the calling
// thread's is the one that stays the task's own when other tasks train in other threads of the process
// (with one BLAS and rmsnorm thread, both run their work in the calling thread).
enum class CpuClock { kProcess, kThread };

TaskResult train_interleaved(Task& task, const std::vector<NormKind>& norms, uint64_t seed,
                             const ProgressFn& progress = nullptr, CpuClock cpu_clock = CpuClock::kProcess);

}  // namespace repro

#endif  // RMSNORM_REPRO_TRAIN_INTERLEAVED_H_
