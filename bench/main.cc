// rmsnorm-bench: how fast the kernels are, against the machine's own memory bandwidth.
#include <algorithm>
#include <fstream>
#include <iostream>

#include "cases.h"
#include "cli.h"
#include "json_report.h"
#include "layouts.h"
#include "machine.h"
#include "quantized.h"
#include "report.h"
#include "runner.h"
#include "targets.h"
#include "timing.h"

namespace rmsnorm_bench {
namespace {

int Main(int argc, char** argv) {
  Options options;
  std::string error;
  if (!ParseOptions(argc, argv, options, error)) {
    std::cerr << "rmsnorm-bench: " << error << "\n\n" << UsageText();
    return 2;
  }
  if (options.help) {
    std::cout << UsageText();
    return 0;
  }

  const MachineInfo machine = DetectMachine();
  std::vector<Case> cases;
  // --quick leaves out the 1-thread rows: they are the slowest cases, and it is a quick look.
  std::vector<Shape> shapes;
  for (const auto& [rows, cols] : options.shapes) shapes.push_back(Shape{rows, cols});
  for (const Case& c : DefaultCases(machine.hardware_threads, options.threads, !options.quick, shapes))
    if (MatchesFilter(c, options.filter)) cases.push_back(c);
  const bool figure_only = options.filter == "strided" || options.filter == "quantized";
  if (options.list) {
    PrintCaseList(std::cout, cases, machine);
    return 0;
  }
  if (cases.empty() && !figure_only) {
    std::cerr << "rmsnorm-bench: no case matches --filter '" << options.filter << "' (see --list)\n";
    return 2;
  }

  RunInfo run;
  run.command = CommandLine(argc, argv);
  run.quick = options.quick;
  run.filter = options.filter;
  run.policy = options.quick ? QuickPolicy() : DefaultPolicy();
  for (const Case& c : cases)
    if (std::find(run.threads.begin(), run.threads.end(), c.threads) == run.threads.end())
      run.threads.push_back(c.threads);

  std::cerr << "rmsnorm-bench: " << cases.size() << " cases on " << MachineLine(machine) << "\n";
  if (MachineLooksBusy(machine, machine.load_average_1min))
    std::cerr << "rmsnorm-bench: warning: load average " << machine.load_average_1min << " on "
              << machine.hardware_threads << " hardware threads; timings will be noisy\n";
  const double start = NowSeconds();
  const std::vector<CaseResult> results =
      RunCases(cases, machine, run.policy, [&](const CaseResult& r, size_t done, size_t total) {
        std::cerr << ProgressLine(r, done, total, NowSeconds() - start) << std::endl;
      });
  // The strided layouts' figure, in the default run or when the filter asks for "strided".
  std::vector<LayoutResult> layouts;
  if (options.filter.empty() || options.filter.find("strided") != std::string::npos)
    layouts = RunLayoutCases(machine.hardware_threads > 1 && !options.quick
                                 ? std::vector<int>{machine.hardware_threads, 1}
                                 : std::vector<int>{machine.hardware_threads},
                             run.policy);
  // The fused quantized output's figure, likewise ("quantized").
  std::vector<QuantizedResult> quantized;
  if (options.filter.empty() || options.filter.find("quantized") != std::string::npos)
    quantized = RunQuantizedCases(machine.hardware_threads > 1 && !options.quick
                                      ? std::vector<int>{machine.hardware_threads, 1}
                                      : std::vector<int>{machine.hardware_threads},
                                  run.policy);
  run.wall_seconds = NowSeconds() - start;
  run.load_average_end = LoadAverage();
  const std::vector<TargetOutcome> targets = EvaluateTargets(results);

  if (!cases.empty())
    PrintReport(std::cout, options.markdown ? ReportFormat::kMarkdown : ReportFormat::kText, machine, run.command,
                run.load_average_end, results, targets);
  PrintLayoutResults(std::cout, layouts, options.markdown);
  PrintQuantizedResults(std::cout, quantized, options.markdown);
  std::cout.flush();

  if (!options.json_path.empty()) {
    std::ofstream json(options.json_path);
    WriteJson(json, machine, run, results, targets);
    json.close();
    if (!json) {
      std::cerr << "rmsnorm-bench: could not write " << options.json_path << "\n";
      return 1;
    }
  }
  std::cerr << "rmsnorm-bench: done in " << static_cast<int>(run.wall_seconds + 0.5) << " s\n";
  return 0;
}

}  // namespace
}  // namespace rmsnorm_bench

int main(int argc, char** argv) { return rmsnorm_bench::Main(argc, argv); }
