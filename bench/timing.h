// The timing harness. Several contenders (the ops of a group and their stream references) are
// sampled in turn, round after round, so that whatever else loads the machine during a group loads
// every contender alike, and their ratios are taken under the same conditions.
#ifndef RMSNORM_BENCH_TIMING_H_
#define RMSNORM_BENCH_TIMING_H_

#include <cstdint>
#include <functional>
#include <vector>

namespace rmsnorm_bench {

struct SamplingPolicy {
  // A sample repeats the call until it lasts at least this long: far above the clock's resolution,
  // and short enough that on a shared machine many samples fit between preemptions.
  double sample_seconds = 1e-3;
  double warmup_seconds = 5e-3;  // per contender, after at least two calls
  int min_samples = 7;
  int max_samples = 31;
  double budget_seconds = 0.5;  // per group: sampling stops after this once min_samples are in
};

SamplingPolicy DefaultPolicy();
SamplingPolicy QuickPolicy();

// Seconds per call, over the samples of one contender.
struct TimeStats {
  double median = 0, min = 0, max = 0, p25 = 0, p75 = 0;
  int samples = 0;
  int64_t calls_per_sample = 0;
  // Half the interquartile range over the median: the "±" the tables print.
  double relative_spread() const { return median > 0 ? (p75 - p25) / (2 * median) : 0; }
};

TimeStats Summarize(std::vector<double> seconds_per_call, int64_t calls_per_sample);

// Warm-up (caches, branch predictors, the thread pool and lazily allocated state reach their steady
// state; a single call when one call is much longer than a sample), then calibration (calls per
// sample), then rounds. Each round takes one sample of every
// contender, starting from a different contender each round so none always follows the same one.
std::vector<TimeStats> MeasureInTurn(const std::vector<std::function<void()>>& contenders,
                                     const SamplingPolicy& policy);

double NowSeconds();

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_TIMING_H_
