// How far apart the cores that run a multi-thread call are: the time a cache line takes to go from one
// OpenMP thread to another and back. On this project's 2-vCPU VMs it takes one of two values, and the
// host switches between them while a run goes on (docs/benchmarks.md, "Where the two vCPUs sit"):
// about 80 ns, or 350-550 ns (most likely the vCPUs on one CCD of the host's EPYC, or on two). Near,
// the pool's fork and join are cheap; far, two threads reach half again as much memory bandwidth. So
// cache-resident and memory-bound multi-thread cases both change speed with it, in opposite ways.
#ifndef RMSNORM_BENCH_CROSS_CORE_H_
#define RMSNORM_BENCH_CROSS_CORE_H_

#include <string>

namespace rmsnorm_bench {

// Nanoseconds per round trip of a line between OpenMP threads 0 and 1 (the library's pool), the median
// of a few batches; NaN when fewer than two threads can run. Takes a few milliseconds; where other work
// holds the cores, it stops after 20 ms and reports the trips it timed, then hundreds of microseconds
// each.
double CrossCoreRoundTripNs();

// "cross-core round trip 81 ns", or "81-352 ns" when the two measurements around a group differ by
// more than a quarter; empty when neither is a number.
std::string CrossCoreText(double before_ns, double after_ns);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_CROSS_CORE_H_
