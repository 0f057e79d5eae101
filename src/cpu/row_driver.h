// How a kernel's work is cut up and run, the same for every norm and direction.
//
// Determinism: the cut depends on the shape only. Row reductions fold fixed column chunks in chunk
// order; parameter gradients sum fixed row blocks, each in row order, and then the blocks in block
// order. Which thread runs what, and whether a row runs fused or split, never changes a bit.
#ifndef RMSNORM_SRC_CPU_ROW_DRIVER_H_
#define RMSNORM_SRC_CPU_ROW_DRIVER_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/parallel.h"
#include "runtime/problem.h"

namespace rmsnorm::cpu {

// Columns per reduction chunk: each chunk's f32 partial sums fold into double in this fixed grid,
// which also bounds the f32 error of any single partial however long the row.
constexpr int64_t kChunk = 16384;
// A row block holds at least this many elements, so a task is worth scheduling...
constexpr int64_t kBlockElements = 16384;
// ...and there are at most this many blocks, which bounds the parameter-gradient scratch.
constexpr int64_t kMaxBlocks = 256;

// Statistics below this (mean square + eps, or variance + eps) are beyond what the f32 path computes
// accurately (squares underflow); so are non-finite sums (squares overflow). Such rare rows are
// recomputed in double: the common path stays fast, and any finite input works.
constexpr double kMinF32Statistic = 0x1p-90;
// The matching bound on a saved rstd: 1 / sqrt(2^-90).
constexpr float kMaxF32Rstd = 0x1p45f;

struct RowPlan {
  int64_t rows = 0, cols = 0;
  int64_t num_chunks = 1;
  int64_t block_rows = 1, num_blocks = 0;
  // Few long rows: run the reductions on (block, chunk) tiles so every thread has work.
  bool split = false;

  int64_t ChunkBegin(int64_t c) const { return c * kChunk; }
  int64_t ChunkEnd(int64_t c) const { return std::min(cols, (c + 1) * kChunk); }
  int64_t BlockBegin(int64_t b) const { return b * block_rows; }
  int64_t BlockEnd(int64_t b) const { return std::min(rows, (b + 1) * block_rows); }
};

inline RowPlan MakePlan(const Problem& p) {
  RowPlan plan;
  plan.rows = p.rows;
  plan.cols = p.cols;
  plan.num_chunks = (p.cols + kChunk - 1) / kChunk;
  const int64_t by_size = (kBlockElements + p.cols - 1) / p.cols;
  const int64_t by_count = (p.rows + kMaxBlocks - 1) / kMaxBlocks;
  plan.block_rows = std::max<int64_t>(1, std::max(by_size, by_count));
  plan.num_blocks = (p.rows + plan.block_rows - 1) / plan.block_rows;
  plan.split = plan.num_chunks > 1 && plan.num_blocks < 2 * runtime::NumThreads();
  return plan;
}

// Per-block partial sums of dweight and dbias, (num_blocks, cols) f32 each, reduced in block order
// in double. Allocated up front, so a failed allocation happens before any output is written.
class ParamGradPartials {
 public:
  ParamGradPartials(const RowPlan& plan, float* dweight, float* dbias)
      : plan_(plan), dweight_(dweight), dbias_(dbias) {
    if (wanted()) storage_.resize(size_t(2 * plan.num_blocks * plan.cols));
  }
  bool wanted() const { return dweight_ != nullptr || dbias_ != nullptr; }
  float* dweight_block(int64_t b) { return wanted() ? storage_.data() + 2 * b * plan_.cols : nullptr; }
  float* dbias_block(int64_t b) { return wanted() ? storage_.data() + (2 * b + 1) * plan_.cols : nullptr; }

  void Reduce() {
    if (!wanted()) return;
    constexpr int64_t kColsPerTask = 1024;
    const int64_t tasks = (plan_.cols + kColsPerTask - 1) / kColsPerTask;
    const int64_t bytes = 2 * plan_.num_blocks * plan_.cols * int64_t{sizeof(float)};
    runtime::ParallelFor(tasks, bytes, [&](int64_t task) {
      const int64_t c0 = task * kColsPerTask, c1 = std::min(plan_.cols, c0 + kColsPerTask);
      ReduceInto(dweight_, 0, c0, c1);
      ReduceInto(dbias_, 1, c0, c1);
    });
  }

 private:
  void ReduceInto(float* out, int64_t which, int64_t c0, int64_t c1) {
    if (out == nullptr) return;
    double sums[1024] = {};
    for (int64_t b = 0; b < plan_.num_blocks; ++b) {
      const float* partial = storage_.data() + (2 * b + which) * plan_.cols;
      for (int64_t c = c0; c < c1; ++c) sums[c - c0] += partial[c];
    }
    for (int64_t c = c0; c < c1; ++c) out[c] = static_cast<float>(sums[c - c0]);
  }

  const RowPlan& plan_;
  float* dweight_;
  float* dbias_;
  std::vector<float> storage_;
};

// Runs a kernel over every row. A Kernel provides:
//   State, Partial                 per-row state (default-constructed = nothing folded) and the
//                                  result of one reduction over one chunk
//   int num_phases()               reduction phases before the output (1 or 2)
//   Partial Reduce(phase, row, c0, c1, state)   reduce columns [c0, c1) of a row
//   void Fold(phase, state&, partial)           fold one chunk's partial (called in chunk order)
//   void Finish(phase, row, state&)             after the last chunk of a phase
//   void Output(row, c0, c1, state, dw, db)     write columns [c0, c1) of a row's outputs and add to
//                                               the block's parameter-gradient partials (or null)
// `bytes` is the memory traffic of the whole call, for the threading decision.
template <class Kernel>
void RunRows(const RowPlan& plan, int64_t bytes, const Kernel& kernel, ParamGradPartials* grads) {
  using State = typename Kernel::State;
  using Partial = typename Kernel::Partial;
  const int phases = kernel.num_phases();
  const bool want_grads = grads != nullptr && grads->wanted();
  auto block_partials = [&](int64_t b, float** dw, float** db) {
    *dw = want_grads ? grads->dweight_block(b) : nullptr;
    *db = want_grads ? grads->dbias_block(b) : nullptr;
  };

  if (!plan.split) {
    runtime::ParallelFor(plan.num_blocks, bytes, [&](int64_t b) {
      float *dw, *db;
      block_partials(b, &dw, &db);
      if (want_grads) {
        std::fill(dw, dw + plan.cols, 0.0f);
        std::fill(db, db + plan.cols, 0.0f);
      }
      for (int64_t row = plan.BlockBegin(b); row < plan.BlockEnd(b); ++row) {
        State state{};
        for (int phase = 0; phase < phases; ++phase) {
          for (int64_t c = 0; c < plan.num_chunks; ++c)
            kernel.Fold(phase, state, kernel.Reduce(phase, row, plan.ChunkBegin(c), plan.ChunkEnd(c), state));
          kernel.Finish(phase, row, state);
        }
        for (int64_t c = 0; c < plan.num_chunks; ++c)
          kernel.Output(row, plan.ChunkBegin(c), plan.ChunkEnd(c), state, dw, db);
      }
    });
    return;
  }

  // Split: every phase is a sweep over (block, chunk) tiles, then a per-row fold in chunk order.
  std::vector<State> states(size_t(plan.rows));
  std::vector<Partial> partials(size_t(plan.rows * plan.num_chunks));
  const int64_t tiles = plan.num_blocks * plan.num_chunks;
  for (int phase = 0; phase < phases; ++phase) {
    runtime::ParallelFor(tiles, bytes, [&](int64_t tile) {
      const int64_t b = tile / plan.num_chunks, c = tile % plan.num_chunks;
      for (int64_t row = plan.BlockBegin(b); row < plan.BlockEnd(b); ++row)
        partials[size_t(row * plan.num_chunks + c)] =
            kernel.Reduce(phase, row, plan.ChunkBegin(c), plan.ChunkEnd(c), states[size_t(row)]);
    });
    runtime::ParallelFor(plan.rows, bytes, [&](int64_t row) {
      State& state = states[size_t(row)];
      for (int64_t c = 0; c < plan.num_chunks; ++c) kernel.Fold(phase, state, partials[size_t(row * plan.num_chunks + c)]);
      kernel.Finish(phase, row, state);
    });
  }
  runtime::ParallelFor(tiles, bytes, [&](int64_t tile) {
    const int64_t b = tile / plan.num_chunks, c = tile % plan.num_chunks;
    const int64_t c0 = plan.ChunkBegin(c), c1 = plan.ChunkEnd(c);
    float *dw, *db;
    block_partials(b, &dw, &db);
    if (want_grads) {
      std::fill(dw + c0, dw + c1, 0.0f);
      std::fill(db + c0, db + c1, 0.0f);
    }
    for (int64_t row = plan.BlockBegin(b); row < plan.BlockEnd(b); ++row)
      kernel.Output(row, c0, c1, states[size_t(row)], dw, db);
  });
}

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_ROW_DRIVER_H_
