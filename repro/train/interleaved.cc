#include "train/interleaved.h"

#include <algorithm>
#include <time.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>

#include "common/adam.h"

namespace repro {
namespace {

double median(std::vector<double> v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double cpu_seconds(CpuClock clock) {
  timespec t;
  clock_gettime(clock == CpuClock::kThread ? CLOCK_THREAD_CPUTIME_ID : CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Running {
  std::unique_ptr<Variant> variant;
  std::unique_ptr<Adam> adam;
  VariantResult result;
};

}  // namespace

double VariantResult::train_seconds() const {
  return std::accumulate(chunk_seconds.begin(), chunk_seconds.end(), 0.0);
}
double VariantResult::norm_seconds() const {
  return std::accumulate(chunk_norm_seconds.begin(), chunk_norm_seconds.end(), 0.0);
}
double VariantResult::norm_share() const { return norm_seconds() / train_seconds(); }

// Per-step times of the chunks, so a short last chunk weighs like the others in the median.
double VariantResult::seconds_per_1k_steps() const {
  std::vector<double> per_step;
  for (size_t i = 0; i < chunk_seconds.size(); ++i) per_step.push_back(chunk_seconds[i] / chunk_steps[i]);
  return 1000.0 * median(per_step);
}
double VariantResult::norm_seconds_per_1k_steps() const {
  std::vector<double> per_step;
  for (size_t i = 0; i < chunk_norm_seconds.size(); ++i)
    per_step.push_back(chunk_norm_seconds[i] / chunk_steps[i]);
  return 1000.0 * median(per_step);
}

double paired_time_ratio(const VariantResult& a, const VariantResult& b, bool cpu) {
  const std::vector<double>& ta = cpu ? a.chunk_cpu_seconds : a.chunk_seconds;
  const std::vector<double>& tb = cpu ? b.chunk_cpu_seconds : b.chunk_seconds;
  std::vector<double> ratios;
  for (size_t i = 0; i < ta.size() && i < tb.size(); ++i)
    ratios.push_back((ta[i] / a.chunk_steps[i]) / (tb[i] / b.chunk_steps[i]));
  return median(ratios);
}

TaskResult train_interleaved(Task& task, const std::vector<NormKind>& norms, uint64_t seed,
                             const ProgressFn& progress, CpuClock cpu_clock) {
  const TaskInfo& info = task.info();
  std::vector<Running> runs(norms.size());
  for (size_t i = 0; i < norms.size(); ++i) {
    NormConfig norm;
    norm.kind = norms[i];
    norm.partial = norms[i] == NormKind::kPRmsNorm ? info.partial : 1.0f;
    runs[i].variant = task.make_variant(norm, seed);
    runs[i].adam = std::make_unique<Adam>(runs[i].variant->params(), info.adam);
    runs[i].result.norm = norms[i];
    runs[i].result.partial = norm.partial;
    runs[i].result.parameters = count_parameters(runs[i].variant->params());
  }

  int64_t done = 0;
  for (int64_t round = 0; done < info.steps; ++round) {
    const int64_t n = std::min(info.chunk, info.steps - done);
    for (size_t k = 0; k < runs.size(); ++k) {
      Running& run = runs[(k + static_cast<size_t>(round)) % runs.size()];  // rotate who goes first
      if (run.result.diverged) continue;
      const double norm_before = run.variant->clock.seconds;
      const double cpu_start = cpu_seconds(cpu_clock);
      const auto start = std::chrono::steady_clock::now();
      for (int64_t step = done; step < done + n; ++step) {
        const double loss = run.variant->forward_backward(step);
        const double grad_norm = run.adam->step(step);
        run.result.losses.push_back(loss);
        if (!std::isfinite(loss) || !std::isfinite(grad_norm)) {
          run.result.diverged = true;
          break;
        }
      }
      run.result.chunk_seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      run.result.chunk_cpu_seconds.push_back(cpu_seconds(cpu_clock) - cpu_start);
      run.result.chunk_norm_seconds.push_back(run.variant->clock.seconds - norm_before);
      run.result.chunk_steps.push_back(static_cast<int64_t>(run.result.losses.size()) - run.result.steps_done);
      run.result.steps_done = static_cast<int64_t>(run.result.losses.size());
    }
    done += n;
    if (progress) {
      std::vector<VariantResult> snapshot;
      for (const Running& run : runs) snapshot.push_back(run.result);
      progress(info, done, snapshot);
    }
  }

  TaskResult out;
  out.info = info;
  out.seed = seed;
  out.references = task.references();
  const Running* layernorm = nullptr;
  for (Running& run : runs) {
    if (run.result.diverged) {
      run.result.metric = std::numeric_limits<double>::quiet_NaN();
      continue;
    }
    run.result.metric = run.variant->evaluate();
    run.result.secondary_metric = run.variant->secondary_metric();
    run.result.outputs = run.variant->outputs();
    if (run.result.norm == NormKind::kLayerNorm) layernorm = &run;
  }
  for (Running& run : runs) {
    if (layernorm != nullptr && !run.result.diverged && &run != layernorm)
      run.result.p_value_vs_layernorm = run.variant->p_value_against(*layernorm->variant);
    out.variants.push_back(std::move(run.result));
  }
  return out;
}

}  // namespace repro
