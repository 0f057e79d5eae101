// OpenMP runs the tasks: a persistent, well-kept pool whose threads spin briefly between calls, so
// back-to-back kernels do not pay a wake-up each.
#include "runtime/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace rmsnorm::runtime {
namespace {

int HardwareThreads() { return std::max(1, omp_get_num_procs()); }

int DefaultThreads() {
  if (const char* env = std::getenv("RMSNORM_NUM_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  return HardwareThreads();
}

std::atomic<int>& Threads() {
  static std::atomic<int> threads{DefaultThreads()};
  return threads;
}

}  // namespace

void SetNumThreads(int n) { Threads().store(n > 0 ? n : HardwareThreads()); }
int NumThreads() { return Threads().load(std::memory_order_relaxed); }

int ThreadsFor(int64_t num_tasks, int64_t bytes) {
  const int64_t threads = std::min<int64_t>(NumThreads(), num_tasks);
  // Inside someone else's parallel region, nesting would oversubscribe the cores.
  if (threads <= 1 || bytes < kInlineBytes || omp_in_parallel()) return 1;
  return static_cast<int>(threads);
}

void ParallelForImpl(int64_t num_tasks, int64_t bytes, TaskFn fn, const void* context) {
  const int threads = ThreadsFor(num_tasks, bytes);
  if (threads == 1) {
    for (int64_t task = 0; task < num_tasks; ++task) fn(context, task);
    return;
  }
  // Static: a thread gets the same tasks call after call (and the same tile in every phase of a split
  // call), so a tensor that fits in cache stays in the cache of the core that last touched it. Handed
  // out dynamically, tasks moved between cores from call to call, and cache-resident calls (64 x 1024,
  // 4096 x 128) ran slower on two threads than on one on this project's 2-core VMs.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t task = 0; task < num_tasks; ++task) fn(context, task);
}

}  // namespace rmsnorm::runtime
