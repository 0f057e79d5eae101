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
  // Normally a few milliseconds. On a machine with other work on its cores, each trip can wait for a
  // time slice: past this budget the initiator stops the probe and reports the trips it timed.
  constexpr double kBudgetNs = 20e6;
  constexpr int64_t kStop = -1;
  // Thread 0 makes the count odd, thread 1 makes it even again: one trip of the line each way.
  alignas(64) std::atomic<int64_t> count{0};
  std::vector<double> batches;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_num_threads() == 2) {
      const bool initiator = omp_get_thread_num() == 0;
      const auto begin = std::chrono::steady_clock::now();
      int64_t next = 0;  // the count this thread waits for before its move
      bool stopped = false;
      for (int64_t batch = -1; batch < kBatches && !stopped; ++batch) {
        const int64_t trips = batch < 0 ? kWarmup : kTrips;
        const auto start = std::chrono::steady_clock::now();
        int64_t trip = 0;
        for (; trip < trips; ++trip) {
          if (initiator) {
            if (trip % 64 == 0 && std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - begin)
                                          .count() > kBudgetNs) {
              count.store(kStop, std::memory_order_release);
              stopped = true;
              break;
            }
            count.store(next + 1, std::memory_order_release);
            next += 2;
            while (count.load(std::memory_order_acquire) != next) {
            }
          } else {
            int64_t seen;
            while ((seen = count.load(std::memory_order_acquire)) != next + 1 && seen != kStop) {
            }
            if (seen == kStop) {
              stopped = true;
              break;
            }
            next += 2;
            count.store(next, std::memory_order_release);
          }
        }
        const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
        if (initiator && trip > 0 && (batch >= 0 || stopped)) batches.push_back(elapsed.count() / double(trip));
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
