// The loops the quantized figure compares the fused kernel with, compiled per SIMD target
// (quantize_loops.cc): the library's own int8 row quantizer as a separate pass over a finished f32 y,
// and the copy of the same bytes (f32 in, one byte per element out).
#ifndef RMSNORM_BENCH_QUANTIZE_LOOPS_H_
#define RMSNORM_BENCH_QUANTIZE_LOOPS_H_

#include <cstdint>

#include "stream.h"

namespace rmsnorm_bench {

// y: (rows, cols) f32 -> q: (rows, cols) int8, scales: (rows), as RMSNORM_QUANT_INT8_ROW quantizes
// (the same code), rows split over `threads` OpenMP threads.
void QuantizeInt8Rows(const float* y, int64_t rows, int64_t cols, int8_t* q, float* scales, int threads);

// q[i] = int(x[i]) saturated to a byte, for i < n: reads n f32 and writes n bytes, with ordinary or
// non-temporal stores (x and q page-aligned), the elements split over `threads` as the stream loops do.
void NarrowingCopy(const float* x, size_t n, uint8_t* q, StreamStores stores, int threads);

}  // namespace rmsnorm_bench

#endif  // RMSNORM_BENCH_QUANTIZE_LOOPS_H_
