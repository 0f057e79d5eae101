// What one case measured.
#ifndef RMSNORM_BENCH_RESULT_H_
#define RMSNORM_BENCH_RESULT_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "cases.h"
#include "timing.h"

namespace rmsnorm_bench {

struct CaseResult {
  Case c;
  int tensors = 0;        // the byte model: tensors of (rows, cols) moved
  int64_t bytes = 0;      // tensors * rows * cols * sizeof(dtype)
  std::string residency;  // smallest cache level holding `bytes`: L1, L2, L3, DRAM
  TimeStats time;         // seconds per call
  double gbps = 0;        // bytes / median time, 1e9 bytes per second

  // The stream loop over the same buffers and bytes, sampled in turn with the op, with ordinary and
  // with non-temporal stores. For work small enough that the library keeps it on the calling thread
  // it is also run inline. The fastest variant is the limit; stream_threads and stream_stores say
  // which.
  std::string stream_loop;
  TimeStats stream_time;
  int stream_threads = 0;
  StreamStores stream_stores = StreamStores::kOrdinary;
  double stream_gbps = 0;
  double fraction_of_stream = 0;  // stream time / op time = op GB/s / stream GB/s
  double ordinary_stream_gbps = 0;  // the fastest variant with ordinary stores, for the second line
  struct StreamCandidate {
    int threads;
    StreamStores stores;
    double median_seconds;
  };
  std::vector<StreamCandidate> stream_candidates;  // every variant measured, the chosen one included
  // The row-phased copy (RunRowPhasedStream, stream.h) over the same buffers, sampled in turn with the
  // others: the stream time over its time, what a kernel that reads each row before writing it can
  // reach. Measured for forwards and backwards streaming from memory (DRAM); NaN elsewhere.
  double row_phased_fraction = std::numeric_limits<double>::quiet_NaN();

  // LayerNorm's median time over this one's, same dtype, shape, direction and threads; NaN if not
  // measured or not comparable.
  double vs_layernorm = std::numeric_limits<double>::quiet_NaN();

  // Multi-thread cases: CrossCoreRoundTripNs() right before and right after the case's group was
  // sampled (cross_core.h); NaN for one thread. Two values far apart mean the host moved the vCPUs
  // while the group ran.
  double cross_core_ns_before = std::numeric_limits<double>::quiet_NaN();
  double cross_core_ns_after = std::numeric_limits<double>::quiet_NaN();

  std::string error;  // the library's message when the case could not run; empty otherwise
  bool ok() const { return error.empty(); }
};

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_RESULT_H_
