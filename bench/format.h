// Numbers as the tables print them.
#ifndef RMSNORM_BENCH_FORMAT_H_
#define RMSNORM_BENCH_FORMAT_H_

#include <string>

namespace rmsnorm_bench {

std::string FormatSeconds(double seconds);  // "18.52 ms", "1.204 us", "640 ns": 3-4 significant digits
std::string FormatGbps(double gbps);        // "29.3"
std::string FormatFixed(double value, int decimals);  // "-" for NaN
std::string FormatPercent(double fraction);           // "1.2%"

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_FORMAT_H_
