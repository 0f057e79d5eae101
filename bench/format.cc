#include "format.h"

#include <cmath>
#include <cstdio>

namespace rmsnorm_bench {

std::string FormatSeconds(double seconds) {
  const char* unit = "s";
  double value = seconds;
  if (seconds < 1e-6) {
    unit = "ns";
    value = seconds * 1e9;
  } else if (seconds < 1e-3) {
    unit = "us";
    value = seconds * 1e6;
  } else if (seconds < 1) {
    unit = "ms";
    value = seconds * 1e3;
  }
  const int decimals = value >= 100 ? 1 : value >= 10 ? 2 : 3;
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*f %s", decimals, value, unit);
  return buffer;
}

std::string FormatGbps(double gbps) { return FormatFixed(gbps, gbps >= 100 ? 0 : 1); }

std::string FormatFixed(double value, int decimals) {
  if (std::isnan(value)) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  return buffer;
}

std::string FormatPercent(double fraction) {
  if (std::isnan(fraction)) return "-";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f%%", fraction * 100);
  return buffer;
}

}  // namespace rmsnorm_bench
