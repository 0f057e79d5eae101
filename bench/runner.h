// Runs the selected cases: groups them so that cases sharing arrays, direction and threads are
// sampled in turn with one stream reference, and reports each case as soon as its group is done.
#ifndef RMSNORM_BENCH_RUNNER_H_
#define RMSNORM_BENCH_RUNNER_H_

#include <functional>
#include <vector>

#include "cases.h"
#include "machine.h"
#include "result.h"
#include "timing.h"

namespace rmsnorm_bench {

using ProgressFn = std::function<void(const CaseResult& result, size_t done, size_t total)>;

// Results in the order the cases were given.
std::vector<CaseResult> RunCases(const std::vector<Case>& cases, const MachineInfo& machine,
                                 const SamplingPolicy& policy, const ProgressFn& progress);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_RUNNER_H_
