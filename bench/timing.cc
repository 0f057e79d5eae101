#include "timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>

namespace rmsnorm_bench {
namespace {

constexpr double kNoDeadline = 1e300;
// A first call this many times longer than the warm-up and sample lengths ends the warm-up.
constexpr double kSelfWarmingFactor = 4;
// A sample may last this many times its planned length before it is cut short.
constexpr double kSampleDeadline = 5;

double Quantile(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const double position = q * double(sorted.size() - 1);
  const size_t below = size_t(std::floor(position));
  const size_t above = std::min(sorted.size() - 1, below + 1);
  const double fraction = position - double(below);
  return sorted[below] + (sorted[above] - sorted[below]) * fraction;
}

// Seconds per call over up to `calls` back-to-back calls. The clock is read only between slices of
// calls (so it costs nothing per call), and the sample ends early past `deadline` seconds: on a loaded
// machine a call calibrated at microseconds can stall for milliseconds, and a sample of thousands of
// them would stall the whole run.
double SecondsPerCall(const std::function<void()>& call, int64_t calls, double deadline) {
  constexpr int64_t kSlices = 8;
  const int64_t slice = std::max<int64_t>(1, calls / kSlices);
  const double start = NowSeconds();
  int64_t done = 0;
  double elapsed = 0;
  while (done < calls) {
    const int64_t n = std::min(slice, calls - done);
    for (int64_t i = 0; i < n; ++i) call();
    done += n;
    elapsed = NowSeconds() - start;
    if (elapsed > deadline) break;
  }
  return elapsed / double(done);
}

}  // namespace

double NowSeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

SamplingPolicy DefaultPolicy() { return SamplingPolicy{}; }

SamplingPolicy QuickPolicy() {
  SamplingPolicy p;
  p.sample_seconds = 0.5e-3;
  p.warmup_seconds = 1e-3;
  p.min_samples = 3;
  p.max_samples = 5;
  p.budget_seconds = 0.05;
  return p;
}

TimeStats Summarize(std::vector<double> seconds_per_call, int64_t calls_per_sample) {
  TimeStats s;
  std::sort(seconds_per_call.begin(), seconds_per_call.end());
  s.samples = int(seconds_per_call.size());
  s.calls_per_sample = calls_per_sample;
  if (seconds_per_call.empty()) return s;
  s.min = seconds_per_call.front();
  s.max = seconds_per_call.back();
  s.median = Quantile(seconds_per_call, 0.5);
  s.p25 = Quantile(seconds_per_call, 0.25);
  s.p75 = Quantile(seconds_per_call, 0.75);
  return s;
}

std::vector<TimeStats> MeasureInTurn(const std::vector<std::function<void()>>& contenders,
                                     const SamplingPolicy& policy) {
  const size_t n = contenders.size();
  std::vector<int64_t> calls_per_sample(n, 1);
  for (size_t i = 0; i < n; ++i) {
    // The first call may fault in lazily allocated state; the fastest later call sizes the samples.
    // A call this long streams far more than any cache holds: one call is all the warm-up it needs,
    // and it is long enough to be its own sample.
    const double first = SecondsPerCall(contenders[i], 1, kNoDeadline);
    if (first >= kSelfWarmingFactor * std::max(policy.warmup_seconds, policy.sample_seconds)) continue;
    double fastest = SecondsPerCall(contenders[i], 1, kNoDeadline);
    double spent = fastest;
    while (spent < policy.warmup_seconds) {
      const double t = SecondsPerCall(contenders[i], 1, kNoDeadline);
      fastest = std::min(fastest, t);
      spent += t;
    }
    const double per_call = std::max(fastest, 1e-9);
    calls_per_sample[i] = std::max<int64_t>(1, int64_t(std::ceil(policy.sample_seconds / per_call)));
  }

  std::vector<std::vector<double>> samples(n);
  const double start = NowSeconds();
  for (int round = 0; round < policy.max_samples; ++round) {
    if (round >= policy.min_samples && NowSeconds() - start >= policy.budget_seconds) break;
    for (size_t k = 0; k < n; ++k) {
      const size_t i = (size_t(round) + k) % n;
      samples[i].push_back(SecondsPerCall(contenders[i], calls_per_sample[i], kSampleDeadline * policy.sample_seconds));
    }
  }

  std::vector<TimeStats> stats;
  for (size_t i = 0; i < n; ++i) stats.push_back(Summarize(samples[i], calls_per_sample[i]));
  return stats;
}

}  // namespace rmsnorm_bench
