// The machine-readable output (--json FILE): the machine, the settings, every case with every field
// the tables show (and the raw statistics behind them), and the targets.
#ifndef RMSNORM_BENCH_JSON_REPORT_H_
#define RMSNORM_BENCH_JSON_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "machine.h"
#include "result.h"
#include "targets.h"
#include "timing.h"

namespace rmsnorm_bench {

struct RunInfo {
  std::string command;
  bool quick = false;
  std::string filter;
  std::vector<int> threads;  // the thread counts the cases ran at
  SamplingPolicy policy;
  double wall_seconds = 0;
  double load_average_end = -1;  // 1-minute load average when the last case finished
};

void WriteJson(std::ostream& out, const MachineInfo& machine, const RunInfo& run,
               const std::vector<CaseResult>& results, const std::vector<TargetOutcome>& targets);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_JSON_REPORT_H_
