// How a call's work is cut up: column chunks, row blocks and groups of rows, and the memory hints
// (streaming stores, next-row prefetches), all decided once per call. Apart from the scheduler
// (row_driver.h), which runs a plan, so that the SIMD loops (loops-inl.h) read a plan's hints without
// depending on how the rows are run. Which parts of the cut decide bits: see row_driver.h.
#ifndef RMSNORM_SRC_CPU_ROW_PLAN_H_
#define RMSNORM_SRC_CPU_ROW_PLAN_H_

#include <algorithm>
#include <cstdint>

#include "runtime/cache_info.h"
#include "runtime/parallel.h"
#include "runtime/problem.h"

namespace rmsnorm::cpu {

// Columns per reduction chunk: each chunk's f32 partial sums fold into double in this fixed grid,
// which also bounds the f32 error of any single partial however long the row.
constexpr int64_t kChunk = 16384;
// A row block holds at least this many elements, so a task is worth scheduling...
constexpr int64_t kBlockElements = 16384;
// ...there are at most this many blocks, and their parameter-gradient partials hold at most this many
// floats per gradient: wide rows get fewer, taller blocks (the split path keeps those parallel).
constexpr int64_t kMaxBlocks = 256;
constexpr int64_t kMaxPartialElements = int64_t{1} << 22;
// A backward's block holds at least this many rows (or all of them): each block zeroes, fills and
// finally re-reads a (cols) f32 partial per gradient, which one-row blocks of long rows made cost more
// than the row's own traffic. Few rows then run on the split path, parallel over column chunks.
constexpr int64_t kMinPartialRows = 8;
// Cache-resident rows of at most kMaxGroupedRowBytes run in groups of up to kGroupRows holding at
// most kGroupBytes of each row tensor, so a group's inputs stay in L1 from its reductions to its
// outputs (see RunRowGroup in row_groups-inl.h). Rows of 512 f32 measured slower in groups; rows streaming
// from memory are memory-bound and keep their next-row prefetches, which assume one row at a time.
// bf16 rows take groups twice as large (GroupScale): where the CPU rounds bf16 itself (AVX3_BF16) they
// measured faster so (the commit says by how much), where it does not, the same; f32 and f16 rows
// measured slower so.
constexpr int64_t kMaxGroupedRowBytes = 1024;
constexpr int64_t kGroupRows = 8;
constexpr int64_t kGroupBytes = 4096;
constexpr int64_t GroupScale(rmsnorm_dtype dtype) { return dtype == RMSNORM_BF16 ? 2 : 1; }

// Grouped strided rows of a call that moves more bytes than the last-level cache holds come from
// memory, and before each group runs, the rows this many bytes (of each input) further down are
// prefetched: at least the next group. The hardware prefetcher follows packed rows, but in a strided
// layout (QK-norm's q heads inside a QKV buffer) it starts over after every gap. Measured on the Zen 5
// (the commit says by how much): calls the cache holds ran slower with these prefetches, and packed
// rows from memory anywhere from 0.67x to 1.6x, depending on the kernel and the type.
constexpr int64_t kGroupPrefetchAheadBytes = 4096;

// Working sets above this (beyond the per-core L2) prefetch rows further down while writing this one.
constexpr int64_t kPrefetchBytes = int64_t{1} << 20;
// How far ahead those prefetches reach: about the bytes a core streams in while a line comes from
// memory (bandwidth times latency, some 50 GB/s times 300 ns), counted over every input prefetched.
// Rows of 16 KiB then prefetch one row down, of 8 KiB two, of 4 KiB four (two where the backward
// prefetches dy and x). Measured on the Zen 5 (the commit says by how much), not on the Zen 3.
constexpr int64_t kPrefetchAheadBytes = int64_t{16} << 10;

// CPUs whose next-row prefetches go into L1 (runtime::PrefetchIntoL1: the Zen 5, where it was
// measured) write streamed rows shorter than this in whole vectors and run the backwards' rows from
// memory one at a time: see RowPlan::stream_in_halves and pair_rows.
constexpr int64_t kHalvesMinRowBytes = int64_t{64} << 10;

struct RowPlan {
  int64_t rows = 0, cols = 0;
  int64_t num_chunks = 1;
  int64_t block_rows = 1, num_blocks = 0;
  // Few long rows: run the reductions on (block, chunk) tiles so every thread has work.
  bool split = false;
  // Calls whose row tensors outgrow a quarter of the last-level cache: non-temporal stores (see
  // runtime/cache_info.h).
  bool stream_outputs = false;
  // Rows stream from memory, a chunk each: while writing a row, prefetch the row this many rows down
  // (kPrefetchAheadBytes of one input; HintsFor halves it for two), or 0 for no prefetches. Kernels
  // that can write two rows in one pass do so for such rows where pair_rows (below).
  int64_t prefetch_rows_ahead = 0;
  // Those prefetches, and the grouped rows' below, bring their lines into L1 as well as L2
  // (runtime::PrefetchIntoL1, runtime/cache_info.h).
  bool prefetch_into_l1 = false;
  // The rows that prefetch come from memory: the call's tensors outgrow the last-level cache. A kernel
  // may then issue its next rows' prefetches from a second pass as well (RmsBackwardKernel::DotPass),
  // which from the last-level cache only costs instructions.
  bool prefetch_from_memory = false;
  // f32 rows streamed on 512-bit x86 are written in 256-bit halves (StreamInHalves, stream_halves-inl.h),
  // made for the Zen 4. Where the next-row prefetches go into L1, only rows of kHalvesMinRowBytes or
  // more: on the Zen 5 whole vectors ran LayerNorm's forward from memory up to 1.2x as fast and
  // RMSNorm's 1.01-1.10x at 4096 columns, 1.1-1.2x at 2048, and cost RMSNorm's about 1.03x at 8192
  // columns and 1.04-1.17x at 16384 (the commits say more).
  bool stream_in_halves = false;
  // Kernels that can write two rows in one pass run prefetching rows in pairs (RunRowPairs,
  // row_groups-inl.h), made for the Zen 4. Where the next-row prefetches go into L1, only rows that come
  // from the last-level cache: on the Zen 5 rows from memory ran faster one at a time (the f32 backward
  // 1.04-1.17x, 2048 to 8192 columns), rows from L3 in pairs (1.07-1.14x, 1024 f32 and 4096 bf16
  // columns), whichever cache level the prefetches filled.
  bool pair_rows = false;
  // Rows reduced, finished and written as a group on the non-split path (see RunRowGroup, row_groups-inl.h).
  int64_t group_rows = 1;
  // Grouped strided rows from memory: before a group runs, prefetch the rows this many rows further
  // down (kGroupPrefetchAheadBytes), or 0 for none. Nonzero only where group_rows > 1.
  int64_t group_prefetch_rows_ahead = 0;

  int64_t ChunkBegin(int64_t c) const { return c * kChunk; }
  int64_t ChunkEnd(int64_t c) const { return std::min(cols, (c + 1) * kChunk); }
  int64_t BlockBegin(int64_t b) const { return b * block_rows; }
  int64_t BlockEnd(int64_t b) const { return std::min(rows, (b + 1) * block_rows); }
  // The tasks the call's parallel loops hand out: row blocks, or (block, chunk) tiles when split.
  int64_t Tasks() const { return split ? num_blocks * num_chunks : num_blocks; }
};

// `tensors`: how many (rows, cols) tensors the call moves, inputs and outputs. `param_grads`: the
// call sums parameter gradients over rows (in per-block partials).
inline RowPlan MakePlan(const Problem& p, int64_t tensors, bool param_grads = false) {
  RowPlan plan;
  plan.rows = p.rows;
  plan.cols = p.cols;
  plan.num_chunks = (p.cols + kChunk - 1) / kChunk;
  if (p.rows == 1) {  // a decode row: skip the divisions below, a fair part of such a call's cost
    plan.block_rows = plan.num_blocks = 1;
  } else {
    const int64_t by_size = (kBlockElements + p.cols - 1) / p.cols;
    const int64_t by_count = (p.rows + kMaxBlocks - 1) / kMaxBlocks;
    const int64_t max_blocks_by_scratch = std::max<int64_t>(1, kMaxPartialElements / p.cols);
    const int64_t by_scratch = (p.rows + max_blocks_by_scratch - 1) / max_blocks_by_scratch;
    const int64_t by_partials = param_grads ? std::min(p.rows, kMinPartialRows) : 1;
    plan.block_rows = std::max<int64_t>({1, by_size, by_count, by_scratch, by_partials});
    plan.num_blocks = (p.rows + plan.block_rows - 1) / plan.block_rows;
  }
  plan.split = plan.num_chunks > 1 && plan.num_blocks < 2 * runtime::NumThreads();
  const int64_t tensor_bytes = p.rows * p.cols * int64_t(DtypeSize(p.dtype));
  plan.stream_outputs = tensors * tensor_bytes >= runtime::StreamingStoreBytes();
  const int64_t row_bytes = p.cols * int64_t(DtypeSize(p.dtype));
  const bool short_rows = row_bytes <= kMaxGroupedRowBytes;
  if (plan.num_chunks == 1 && p.rows > 1 && !short_rows && tensors * tensor_bytes > kPrefetchBytes)
    plan.prefetch_rows_ahead = std::max<int64_t>(1, kPrefetchAheadBytes / row_bytes);
  plan.prefetch_into_l1 = runtime::PrefetchIntoL1();
  plan.prefetch_from_memory =
      plan.prefetch_rows_ahead != 0 && tensors * tensor_bytes > runtime::LastLevelCacheBytes();
  plan.stream_in_halves = !plan.prefetch_into_l1 || row_bytes >= kHalvesMinRowBytes;
  plan.pair_rows = plan.prefetch_rows_ahead != 0 && !(plan.prefetch_into_l1 && plan.prefetch_from_memory);
  if (p.rows > 1 && !plan.split && plan.prefetch_rows_ahead == 0 && short_rows) {
    const int64_t scale = GroupScale(p.dtype);
    plan.group_rows = std::min({scale * kGroupRows, scale * kGroupBytes / row_bytes, p.rows});
    if (p.strided && plan.group_rows > 1 && tensors * tensor_bytes > runtime::LastLevelCacheBytes())
      plan.group_prefetch_rows_ahead = std::max(plan.group_rows, kGroupPrefetchAheadBytes / row_bytes);
  }
  return plan;
}

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_ROW_PLAN_H_
