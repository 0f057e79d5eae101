// A table of strings rendered as aligned plain text (for terminals) or GitHub markdown (for docs):
// one source for both, so the documented table is exactly what the terminal showed.
#ifndef RMSNORM_BENCH_TABLE_H_
#define RMSNORM_BENCH_TABLE_H_

#include <ostream>
#include <string>
#include <vector>

namespace rmsnorm_bench {

struct Table {
  std::vector<std::string> header;
  std::vector<bool> right_aligned;  // per column; numbers read best right-aligned
  std::vector<std::vector<std::string>> rows;
};

void PrintText(std::ostream& out, const Table& table);
void PrintMarkdown(std::ostream& out, const Table& table);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_TABLE_H_
