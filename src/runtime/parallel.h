// Threads. The kernels split their work into tasks fixed by the shape alone (never by the thread
// count), so results are bitwise identical however many threads run them.
#ifndef RMSNORM_SRC_RUNTIME_PARALLEL_H_
#define RMSNORM_SRC_RUNTIME_PARALLEL_H_

#include <cstdint>

namespace rmsnorm::runtime {

// 0 = all hardware threads.
void SetNumThreads(int n);
int NumThreads();

// Below this many bytes moved, a call stays on the calling thread: waking the pool costs more
// than the work (a decode row is a few KiB).
constexpr int64_t kInlineBytes = int64_t{128} << 10;

// How many threads ParallelFor(num_tasks, bytes, ...) runs on: 1 where the loop stays inline.
int ThreadsFor(int64_t num_tasks, int64_t bytes);

using TaskFn = void (*)(const void* context, int64_t task);
void ParallelForImpl(int64_t num_tasks, int64_t bytes, TaskFn fn, const void* context);

// Runs fn(task) for every task in [0, num_tasks), in any order, on up to NumThreads() threads.
// `bytes` is the memory traffic of the whole loop; small loops run inline. fn must not throw.
template <class Fn>
void ParallelFor(int64_t num_tasks, int64_t bytes, const Fn& fn) {
  ParallelForImpl(
      num_tasks, bytes, [](const void* context, int64_t task) { (*static_cast<const Fn*>(context))(task); }, &fn);
}

}  // namespace rmsnorm::runtime

#endif  // RMSNORM_SRC_RUNTIME_PARALLEL_H_
