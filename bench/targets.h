// The performance targets, evaluated on a run's results. Speed is measured, not asserted:
// a missed target is reported, never an error.
#ifndef RMSNORM_BENCH_TARGETS_H_
#define RMSNORM_BENCH_TARGETS_H_

#include <string>
#include <vector>

#include "result.h"

namespace rmsnorm_bench {

struct TargetOutcome {
  std::string name;        // what is measured, in words
  std::string cases;       // the case ids it is computed from
  std::string comparison;  // ">=" or "<="
  double threshold = 0;
  double measured = 0;     // valid when evaluated
  bool evaluated = false;  // false when a case it needs was not run (or failed)
  std::string detail;      // the times behind a ratio
  bool passed() const { return evaluated && (comparison == ">=" ? measured >= threshold : measured <= threshold); }
  const char* status() const { return !evaluated ? "NOT RUN" : passed() ? "PASS" : "MISS"; }
};

// Each target reads the cases at the largest thread count that ran them (all cores by default).
std::vector<TargetOutcome> EvaluateTargets(const std::vector<CaseResult>& results);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_TARGETS_H_
