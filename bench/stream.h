// The physical limit each case is compared against: STREAM-style loops that move exactly the bytes
// of the case's byte model, over the case's own buffers, in its dtype, on its threads.
#ifndef RMSNORM_BENCH_STREAM_H_
#define RMSNORM_BENCH_STREAM_H_

#include <cstddef>

#include "rmsnorm/rmsnorm.h"

namespace rmsnorm_bench {

// Which loop stands for which byte model (a, b inputs; p, q outputs; s a scalar):
enum class StreamLoop {
  kScale,           // p = s·a                         2 tensors: a forward
  kTriad,           // p = a + s·b                     3 tensors: a backward (dy, x -> dx)
  kAddScale,        // q = a + b, p = s·q              4 tensors: a fused residual add + forward
  kScaleThenTriad,  // kScale then kTriad, two calls   5 tensors: forward then backward
};

// How the loops write: ordinary stores, or non-temporal ones that send each line to memory without
// reading it first (what the library's kernels do for outputs beyond the last-level cache). For data
// that streams from memory the non-temporal loop is the faster, the honest limit; for data that stays
// in cache the ordinary one is. kRowPhased names RunRowPhasedStream's copy (non-temporal stores, a
// row at a time; RunStream does not take it). A case is compared with the fastest of them.
enum class StreamStores { kOrdinary, kNonTemporal, kRowPhased };

int StreamTensors(StreamLoop loop);
const char* StreamStoresName(StreamStores stores);
const char* StreamLoopName(StreamLoop loop);

// Operands in the case's dtype, n elements each. kScale reads a and writes p; kTriad reads a, b and
// writes p; kAddScale reads a, b and writes q, p; kScaleThenTriad writes q = s·a, then p = b + s·a
// (a forward x -> y, then a backward (dy, x) -> dx).
struct StreamOperands {
  const void* a = nullptr;
  const void* b = nullptr;
  void* p = nullptr;
  void* q = nullptr;
};

// Runs the loop once. threads <= 1 runs on the calling thread; otherwise an OpenMP team of `threads`
// splits the elements into equal contiguous ranges (schedule(static)), as the library's pool would.
// Non-temporal stores need the operands page-aligned (as Workspace and Tensor allocate them).
void RunStream(StreamLoop loop, StreamStores stores, rmsnorm_dtype dtype, size_t n, int threads,
               const StreamOperands& operands);

// The norms' two passes without their arithmetic, for kScale and kTriad over (rows, cols) operands:
// each row's inputs are read (summed, so the loads stay), then its output is written with
// non-temporal stores while the inputs of a row further down are prefetched into L2, as the library's
// kernels do for rows streaming from memory (src/cpu/row_plan.h). A candidate for the limit like the
// others (on some machines, some of the time, it is the fastest copy), and reported on its own: what
// a kernel that must read a row before writing it can reach, so the distance between a kernel and the
// limit splits into what its structure costs and what its own work does. Threads as for RunStream,
// with contiguous ranges of rows.
void RunRowPhasedStream(StreamLoop loop, rmsnorm_dtype dtype, size_t rows, size_t cols, int threads,
                        const StreamOperands& operands);

// The Highway target the loops dispatch to (compare with rmsnorm_cpu_target()).
const char* StreamTarget();

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_STREAM_H_
