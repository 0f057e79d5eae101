// The human-readable output: progress lines, the results tables, the decode-row comparison and the
// targets summary, as plain text or markdown.
#ifndef RMSNORM_BENCH_REPORT_H_
#define RMSNORM_BENCH_REPORT_H_

#include <ostream>
#include <string>
#include <vector>

#include "cases.h"
#include "machine.h"
#include "result.h"
#include "targets.h"

namespace rmsnorm_bench {

enum class ReportFormat { kText, kMarkdown };

std::string MachineLine(const MachineInfo& machine);
std::string ProgressLine(const CaseResult& result, size_t done, size_t total, double elapsed_seconds);
void PrintCaseList(std::ostream& out, const std::vector<Case>& cases, const MachineInfo& machine);
// "" when the machine looked quiet at start and end; otherwise a warning sentence.
std::string BusyWarning(const MachineInfo& machine, double load_average_end);

void PrintReport(std::ostream& out, ReportFormat format, const MachineInfo& machine, const std::string& command,
                 double load_average_end, const std::vector<CaseResult>& results,
                 const std::vector<TargetOutcome>& targets);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_REPORT_H_
