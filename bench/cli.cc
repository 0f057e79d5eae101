#include "cli.h"

#include <algorithm>
#include <cstdlib>

namespace rmsnorm_bench {
namespace {

// Calls parse(item) for each comma-separated item of text; false if text is empty or any call fails.
template <class Parse>
bool ForEachItem(const std::string& text, const Parse& parse) {
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    if (!parse(text.substr(start, comma - start))) return false;
    start = comma + 1;
  }
  return true;
}

bool ParseThreads(const std::string& text, std::vector<int>& threads) {
  threads.clear();
  return ForEachItem(text, [&](const std::string& item) {
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || n < 1 || n > 1024) return false;
    threads.push_back(int(n));
    return true;
  });
}

// "8192x4096,4096x128": rows >= 1 and cols >= 1 each.
bool ParseShapes(const std::string& text, std::vector<std::pair<int64_t, int64_t>>& shapes) {
  shapes.clear();
  return ForEachItem(text, [&](const std::string& item) {
    char* end = nullptr;
    const long long rows = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != 'x' || rows < 1) return false;
    const char* cols_text = end + 1;
    const long long cols = std::strtoll(cols_text, &end, 10);
    if (end == cols_text || *end != '\0' || cols < 1 || rows > (int64_t{1} << 40) / cols) return false;
    shapes.emplace_back(rows, cols);
    return true;
  });
}

}  // namespace

const char* UsageText() {
  return "usage: rmsnorm-bench [options]\n"
         "\n"
         "Times RMSNorm, pRMSNorm(6.25%), LayerNorm, L2-Norm and fused add+RMSNorm (forward, backward,\n"
         "forward+backward; f32, bf16, f16) against a stream loop that moves the same bytes on the same\n"
         "threads, then checks the performance targets. Progress goes to stderr, the report to stdout.\n"
         "\n"
         "  --json FILE         also write every case, the machine and the targets as JSON\n"
         "  --markdown          print the report as markdown tables (for docs/benchmarks.md)\n"
         "  --quick             a few samples per case and no extra 1-thread rows: seconds\n"
         "                      instead of about a minute\n"
         "  --threads N[,M]     run every case at these thread counts (default: all hardware\n"
         "                      threads, plus 1 thread for the key cases unless --quick)\n"
         "  --shapes RxC[,RxC]  these shapes instead of the default ones (e.g. 2048x4096,4096x128)\n"
         "  --filter S[,T]      only cases whose id contains S (or T); ^S anchors at the start.\n"
         "                      ids look like rmsnorm/fwd/f32/8192x4096/t2\n"
         "  --list              print the selected case ids, bytes moved and cache level; run nothing\n"
         "  --help              this text\n"
         "\n"
         "The exit status is 0 whether targets pass or not; 2 for a bad command line.\n";
}

bool ParseOptions(int argc, char** argv, Options& options, std::string& error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    bool has_value = false;
    const size_t equals = arg.find('=');
    if (arg.rfind("--", 0) == 0 && equals != std::string::npos) {
      value = arg.substr(equals + 1);
      arg = arg.substr(0, equals);
      has_value = true;
    }
    auto take_value = [&]() -> bool {
      if (has_value) return true;
      if (i + 1 >= argc) {
        error = arg + " needs a value";
        return false;
      }
      value = argv[++i];
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      options.help = true;
    } else if (arg == "--quick") {
      options.quick = true;
    } else if (arg == "--markdown") {
      options.markdown = true;
    } else if (arg == "--list") {
      options.list = true;
    } else if (arg == "--json") {
      if (!take_value()) return false;
      options.json_path = value;
    } else if (arg == "--filter") {
      if (!take_value()) return false;
      options.filter = value;
    } else if (arg == "--shapes") {
      if (!take_value()) return false;
      if (!ParseShapes(value, options.shapes)) {
        error = "--shapes wants rows x cols like 8192x4096 or 1x4096,4096x128; got '" + value + "'";
        return false;
      }
    } else if (arg == "--threads") {
      if (!take_value()) return false;
      if (!ParseThreads(value, options.threads)) {
        error = "--threads wants positive counts like 2 or 1,2; got '" + value + "'";
        return false;
      }
    } else {
      error = "unknown argument '" + std::string(argv[i]) + "'";
      return false;
    }
    if (has_value && (arg == "--help" || arg == "--quick" || arg == "--markdown" || arg == "--list")) {
      error = arg + " takes no value";
      return false;
    }
  }
  return true;
}

std::string CommandLine(int argc, char** argv) {
  std::string line;
  for (int i = 0; i < argc; ++i) {
    std::string arg = argv[i];
    if (i == 0) {
      const size_t slash = arg.rfind('/');
      if (slash != std::string::npos) arg = arg.substr(slash + 1);  // where it was built is no one's business
    }
    const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789-_=./,:+") == std::string::npos;
    if (i) line += ' ';
    if (plain) {
      line += arg;
      continue;
    }
    line += '\'';
    for (char ch : arg) line += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    line += '\'';
  }
  return line;
}

}  // namespace rmsnorm_bench
