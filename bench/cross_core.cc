#include "cross_core.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <vector>

#include "format.h"

namespace rmsnorm_bench {

double CrossCoreRoundTripNs() {
  if (omp_get_num_procs() < 2) return std::nan("");
  constexpr int64_t kWarmup = 200, kTrips = 2000, kBatches = 5;
  // Thread 0 makes the count odd, thread 1 makes it even again: one trip of the line each way.
  alignas(64) std::atomic<int64_t> count{0};
  std::vector<double> batches;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_num_threads() == 2) {
      const bool initiator = omp_get_thread_num() == 0;
      int64_t next = 0;  // the count this thread waits for before its move
      for (int64_t batch = -1; batch < kBatches; ++batch) {
        const int64_t trips = batch < 0 ? kWarmup : kTrips;
        const auto start = std::chrono::steady_clock::now();
        for (int64_t trip = 0; trip < trips; ++trip) {
          if (initiator) {
            count.store(next + 1, std::memory_order_release);
            next += 2;
            while (count.load(std::memory_order_acquire) != next) {
            }
          } else {
            while (count.load(std::memory_order_acquire) != next + 1) {
            }
            next += 2;
            count.store(next, std::memory_order_release);
          }
        }
        const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
        if (initiator && batch >= 0) batches.push_back(elapsed.count() / double(trips));
      }
    }
  }
  if (batches.empty()) return std::nan("");
  std::nth_element(batches.begin(), batches.begin() + batches.size() / 2, batches.end());
  return batches[batches.size() / 2];
}

std::string CrossCoreText(double before_ns, double after_ns) {
  if (std::isnan(before_ns)) before_ns = after_ns;
  if (std::isnan(after_ns)) after_ns = before_ns;
  if (std::isnan(before_ns)) return "";
  const double low = std::min(before_ns, after_ns), high = std::max(before_ns, after_ns);
  const std::string range =
      high > 1.25 * low ? FormatFixed(low, 0) + "-" + FormatFixed(high, 0) : FormatFixed(0.5 * (low + high), 0);
  return "cross-core round trip " + range + " ns";
}

}  // namespace rmsnorm_bench
