// Command-line options of rmsnorm-bench.
#ifndef RMSNORM_BENCH_CLI_H_
#define RMSNORM_BENCH_CLI_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace rmsnorm_bench {

struct Options {
  std::string json_path;     // --json FILE
  bool markdown = false;     // --markdown
  bool quick = false;        // --quick
  std::vector<int> threads;  // --threads N[,M...]; empty: the default thread plan
  std::vector<std::pair<int64_t, int64_t>> shapes;  // --shapes RxC[,RxC...]; empty: the default shapes
  std::string filter;        // --filter SUBSTR[,SUBSTR...]
  bool list = false;         // --list
  bool help = false;         // --help
};

// Returns false and sets `error` on a malformed command line.
bool ParseOptions(int argc, char** argv, Options& options, std::string& error);

const char* UsageText();

// argv joined with spaces, arguments quoted where a shell would need it.
std::string CommandLine(int argc, char** argv);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_CLI_H_
