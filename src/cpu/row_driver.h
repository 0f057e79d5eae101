// How a kernel's work is run over the cut of row_plan.h, the same for every norm and direction.
//
// Determinism: the cut depends on the shape only. Row reductions fold fixed column chunks in chunk
// order; parameter gradients sum fixed row blocks, each in row order, and then the blocks in block
// order. Which thread runs what, and whether a row runs fused or split, never changes a bit.
#ifndef RMSNORM_SRC_CPU_ROW_DRIVER_H_
#define RMSNORM_SRC_CPU_ROW_DRIVER_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "cpu/dispatch.h"
#include "cpu/rare_rows.h"
#include "cpu/row_plan.h"
#include "hwy/cache_control.h"
#include "runtime/parallel.h"
#include "runtime/problem.h"
#include "runtime/scratch.h"

namespace rmsnorm::cpu {

// Per-block partial sums of dweight and dbias: (num_blocks, cols) f32 for each gradient wanted, summed
// over blocks in block order in double. A single block sums straight into the output. The scratch is
// the calling thread's, kept between calls within the process-wide limit (runtime/scratch.h: a
// backward must not pay a fresh allocation and its page faults each time), and is taken before any
// output is written.
class ParamGradPartials {
 public:
  ParamGradPartials(const RowPlan& plan, float* dweight, float* dbias)
      : plan_(plan), dweight_(dweight), dbias_(dbias) {
    const int64_t gradients = (dweight ? 1 : 0) + (dbias ? 1 : 0);
    if (gradients == 0 || plan.num_blocks == 1) return;
    const size_t needed = size_t(gradients * plan.num_blocks * plan.cols);
    float* workspace = workspace_.Borrow(runtime::ScratchSlot::kParamGradPartials, needed);
    dweight_partials_ = dweight ? workspace : nullptr;
    dbias_partials_ = dbias ? workspace + (dweight ? plan.num_blocks * plan.cols : 0) : nullptr;
  }

  bool wanted() const { return dweight_ != nullptr || dbias_ != nullptr; }
  // Block b's partial sums, cols floats, or null when that gradient is not wanted. Zeroed by the block.
  float* dweight_block(int64_t b) const { return Block(dweight_, dweight_partials_, b); }
  float* dbias_block(int64_t b) const { return Block(dbias_, dbias_partials_, b); }

  void Reduce() const {
    if (plan_.num_blocks == 1 || !wanted()) return;
    constexpr int64_t kColsPerTask = 1024;
    const int64_t tasks = (plan_.cols + kColsPerTask - 1) / kColsPerTask;
    const int64_t bytes = 2 * plan_.num_blocks * plan_.cols * int64_t{sizeof(float)};
    runtime::ParallelFor(tasks, bytes, [&](int64_t task) {
      const int64_t c0 = task * kColsPerTask, c1 = std::min(plan_.cols, c0 + kColsPerTask);
      SumBlocks(dweight_partials_, dweight_, c0, c1);
      SumBlocks(dbias_partials_, dbias_, c0, c1);
    });
  }

 private:
  float* Block(float* output, float* partials, int64_t b) const {
    if (output == nullptr) return nullptr;
    return plan_.num_blocks == 1 ? output : partials + b * plan_.cols;
  }

  void SumBlocks(const float* partials, float* out, int64_t c0, int64_t c1) const {
    if (out == nullptr) return;
    double sums[1024] = {};
    for (int64_t b = 0; b < plan_.num_blocks; ++b)
      for (int64_t c = c0; c < c1; ++c) sums[c - c0] += partials[b * plan_.cols + c];
    for (int64_t c = c0; c < c1; ++c) out[c] = static_cast<float>(sums[c - c0]);
  }

  const RowPlan& plan_;
  float* dweight_;
  float* dbias_;
  runtime::ScratchLease workspace_;
  float* dweight_partials_ = nullptr;
  float* dbias_partials_ = nullptr;
};

// A per-column parameter as the kernels read it, once per row a vector at a time: the gain they
// multiply by, or the bias. Copied once per call into the calling thread's scratch, which starts on a
// cache line, in two cases:
// - the gain's weight_offset is not 0: the copy holds offset + weight, the same f32 sums the loops
//   would form per element (so no bit changes), and the hot loops load a gain instead of adding one;
// - the values do not start on a cache line (a parameter carved out of a larger buffer, or from an
//   allocator that aligns to 16 bytes), where every vector read of them straddles two lines on every
//   row, and the call has rows enough to pay for the copy. On one thread that is any call of more
//   than one row (a decode row reads the values once, as the copy would). The pool's other threads
//   first pull the freshly written lines from the calling core, which cost more than the straddling
//   saved until each had some kMinRowsPerThreadToRealign rows (the commit has the figures).
class ColumnParam {
 public:
  static constexpr int64_t kMinRowsPerThreadToRealign = 128;

  // plan, bytes: the call's, as RunRows takes them.
  ColumnParam(const float* values, float offset, const RowPlan& plan, int64_t bytes, runtime::ScratchSlot slot)
      : data_(values) {
    if (values == nullptr) return;
    const bool off_line = reinterpret_cast<uintptr_t>(values) % 64 != 0;
    if (offset == 0.0f && !(off_line && WorthRealigning(plan, bytes))) return;
    float* scratch = scratch_.Borrow(slot, size_t(plan.cols));
    if (offset == 0.0f) {
      std::memcpy(scratch, values, size_t(plan.cols) * sizeof(float));  // not 0 + value, which makes -0 +0
    } else {
      for (int64_t i = 0; i < plan.cols; ++i) scratch[i] = offset + values[i];
    }
    data_ = scratch;
  }
  const float* data() const { return data_; }  // (cols) f32, or null where the call has none

 private:
  static bool WorthRealigning(const RowPlan& plan, int64_t bytes) {
    if (plan.rows < 2) return false;
    const int threads = runtime::ThreadsFor(plan.Tasks(), bytes);
    return threads == 1 || plan.rows >= kMinRowsPerThreadToRealign * threads;
  }

  runtime::ScratchLease scratch_;
  const float* data_;
};

// A forward's arguments with its gain (the weights plus weight_offset, or null for a gain of 1) and its
// bias as the kernels read them.
class ForwardParams {
 public:
  ForwardParams(const Problem& p, const ForwardArgs& a, const RowPlan& plan, int64_t bytes)
      : gain_(a.weight, p.weight_offset, plan, bytes, runtime::ScratchSlot::kGain),
        bias_(a.bias, 0.0f, plan, bytes, runtime::ScratchSlot::kBias),
        args_(a) {
    args_.bias = bias_.data();
  }
  const float* gain() const { return gain_.data(); }
  const ForwardArgs& args() const { return args_; }

 private:
  ColumnParam gain_, bias_;
  ForwardArgs args_;
};

// ---- The Kernel concept (see RunRows), checked at compile time -----------------------------------
//
// A kernel that lacks a member RunRows calls, or has it with a signature the call does not fit, fails
// with a static_assert that names the member and the signature expected, before the errors from deep
// inside the driver's templates. C++17 detection: each Op below is well-formed exactly when the kernel
// has what RunRows uses, called the way RunRows calls it.
namespace kernel_concept {

template <class Void, template <class...> class Op, class... Args>
struct Detector : std::false_type {};
template <template <class...> class Op, class... Args>
struct Detector<std::void_t<Op<Args...>>, Op, Args...> : std::true_type {};
// Op<Args...> is well-formed.
template <template <class...> class Op, class... Args>
constexpr bool kDetected = Detector<void, Op, Args...>::value;

// Op<Args...> is well-formed and converts to To.
template <class To, template <class...> class Op, class... Args>
constexpr bool DetectedConvertible() {
  if constexpr (kDetected<Op, Args...>) {
    return std::is_convertible_v<Op<Args...>, To>;
  } else {
    return false;
  }
}

template <class K>
using StateOf = typename K::State;
template <class K>
using PartialOf = typename K::Partial;
template <class K>
using NumPhasesOf = decltype(std::declval<const K&>().num_phases());
template <class K>
using ReduceOf = decltype(std::declval<const K&>().Reduce(int{}, int64_t{}, int64_t{}, int64_t{},
                                                          std::declval<const typename K::State&>()));
template <class K>
using FoldOf = decltype(std::declval<const K&>().Fold(int{}, std::declval<typename K::State&>(),
                                                      std::declval<const typename K::Partial&>()));
template <class K>
using FinishOf = decltype(std::declval<const K&>().Finish(int{}, int64_t{}, std::declval<typename K::State&>()));
template <class K>
using OutputOf = decltype(std::declval<const K&>().Output(int64_t{}, int64_t{}, int64_t{},
                                                          std::declval<const typename K::State&>(),
                                                          std::declval<float*>(), std::declval<float*>()));

}  // namespace kernel_concept

// True, or a compile error per member that Kernel lacks. Only in constant expressions: no code.
template <class Kernel>
constexpr bool CheckKernel() {
  using namespace kernel_concept;
  constexpr bool kHasState = kDetected<StateOf, Kernel>;
  constexpr bool kHasPartial = kDetected<PartialOf, Kernel>;
  static_assert(kHasState, "Kernel lacks `using State = ...;` (per-row state)");
  static_assert(kHasPartial, "Kernel lacks `using Partial = ...;` (one chunk's reduction)");
  // Without both types the members' signatures cannot be named: the two errors above say why.
  if constexpr (kHasState && kHasPartial) {
    static_assert(std::is_default_constructible_v<typename Kernel::State>,
                  "Kernel::State must be default-constructible (default-constructed = nothing folded)");
    static_assert(std::is_default_constructible_v<typename Kernel::Partial> &&
                      std::is_copy_assignable_v<typename Kernel::Partial>,
                  "Kernel::Partial must be default-constructible and copy-assignable");
    static_assert(DetectedConvertible<int, NumPhasesOf, Kernel>(), "Kernel lacks `int num_phases() const`");
    static_assert(DetectedConvertible<typename Kernel::Partial, ReduceOf, Kernel>(),
                  "Kernel lacks `Partial Reduce(int phase, int64_t row, int64_t c0, int64_t c1, "
                  "const State& state) const`");
    static_assert(kDetected<FoldOf, Kernel>,
                  "Kernel lacks `void Fold(int phase, State& state, const Partial& partial) const`");
    static_assert(kDetected<FinishOf, Kernel>,
                  "Kernel lacks `void Finish(int phase, int64_t row, State& state) const`");
    static_assert(kDetected<OutputOf, Kernel>,
                  "Kernel lacks `void Output(int64_t row, int64_t c0, int64_t c1, const State& state, float* dw, "
                  "float* db) const`");
  }
  return true;
}

// Runs a kernel over every row. A Kernel provides:
//   State, Partial                 per-row state (default-constructed = nothing folded) and the
//                                  result of one reduction over one chunk
//   int num_phases()               reduction phases before the output (1 or 2)
//   Partial Reduce(phase, row, c0, c1, state)   reduce columns [c0, c1) of a row
//   void Fold(phase, state&, partial)           fold one chunk's partial (called in chunk order)
//   void Finish(phase, row, state&)             after the last chunk of a phase
//   void Output(row, c0, c1, state, dw, db)     write columns [c0, c1) of a row's outputs and add to
//                                               the block's parameter-gradient partials (or null)
//   void OutputRow(row, c0, c1, state, dw, db)  optional: Output for rows run one at a time (see
//                                               RunRowGroup), bit for bit the same
//   bool OutputPair(row, s0, s1, dw, db)        optional: Output of the whole rows row and row + 1 in
//                                               one pass (see RunRowPairs), bit for bit the same, or
//                                               false to leave them to Output
//   bool ReducePair(phase, row, states, partials)  optional, beside OutputPair: their Reduce in one
//                                               pass, or false to leave the phase to Reduce
// CheckKernel above turns a missing member into an error that names it. `bytes` is the memory traffic
// of the whole call, for the threading decision.
template <class Kernel>
void RunRows(const RowPlan& plan, int64_t bytes, const Kernel& kernel, const ParamGradPartials* grads) {
  static_assert(CheckKernel<Kernel>());
  using State = typename Kernel::State;
  using Partial = typename Kernel::Partial;
  const int phases = kernel.num_phases();
  // Block b's parameter-gradient partials over columns [c0, c1), zeroed, or null if not wanted.
  auto block_partials = [&](int64_t b, int64_t c0, int64_t c1, float** dw, float** db) {
    *dw = grads ? grads->dweight_block(b) : nullptr;
    *db = grads ? grads->dbias_block(b) : nullptr;
    if (*dw) std::fill(*dw + c0, *dw + c1, 0.0f);
    if (*db) std::fill(*db + c0, *db + c1, 0.0f);
  };

  if (!plan.split) {
    auto run_block = [&](int64_t b) {
      float *dw, *db;
      block_partials(b, 0, plan.cols, &dw, &db);
      RunBlockRows(plan, kernel, plan.BlockBegin(b), plan.BlockEnd(b), dw, db);  // row_groups-inl.h
      if (plan.stream_outputs) hwy::FlushStream();  // non-temporal stores are weakly ordered
    };
    // One block (a decode row): called directly, so it inlines; the pool's indirection is a fair part
    // of such a call.
    if (plan.num_blocks == 1) return run_block(0);
    runtime::ParallelFor(plan.num_blocks, bytes, run_block);
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
    block_partials(b, c0, c1, &dw, &db);
    for (int64_t row = plan.BlockBegin(b); row < plan.BlockEnd(b); ++row)
      kernel.Output(row, c0, c1, states[size_t(row)], dw, db);
    if (plan.stream_outputs) hwy::FlushStream();
  });
}

// A forward: Kernel<T, kWeight, kBias>(problem, plan, args, gain) over every row, T the storage type of
// p.dtype, with the optional tensors as template arguments. `tensors` as for MakePlan.
template <template <class, bool, bool> class Kernel, class T>
void RunForward(const Problem& p, const ForwardArgs& a, int64_t tensors) {
  HWY_DASSERT(p.dtype == StorageOf<T>::dtype);
  const RowPlan plan = MakePlan(p, tensors);
  const int64_t bytes = tensors * p.rows * p.cols * int64_t(DtypeSize(p.dtype));
  const ForwardParams params(p, a, plan, bytes);
  WithFlag(a.weight != nullptr, [&](auto weight) RMSNORM_INLINE_LAMBDA {
    WithFlag(a.bias != nullptr, [&](auto bias) RMSNORM_INLINE_LAMBDA {
      const Kernel<T, decltype(weight)::value, decltype(bias)::value> kernel(p, plan, params.args(), params.gain());
      RunRows(plan, bytes, kernel, nullptr);
    });
  });
}

// A backward: Kernel<T, kWeight, kDweight, kDbias>, then the parameter gradients' block reduction,
// and the columns of dweight and dbias that left f32's range summed again in double
// (Kernel::ResumParamGrads, see ResumParamGradColumns in rare_rows.h).
template <template <class, bool, bool, bool> class Kernel, class T>
void RunBackward(const Problem& p, const BackwardArgs& a) {
  HWY_DASSERT(p.dtype == StorageOf<T>::dtype);
  const RowPlan plan = MakePlan(p, 3, a.dweight != nullptr || a.dbias != nullptr);
  const ParamGradPartials grads(plan, a.dweight, a.dbias);
  const int64_t bytes = 3 * p.rows * p.cols * int64_t(DtypeSize(p.dtype));
  const ColumnParam gain(a.weight, p.weight_offset, plan, bytes, runtime::ScratchSlot::kGain);
  WithFlag(a.weight != nullptr, [&](auto weight) RMSNORM_INLINE_LAMBDA {
    WithFlag(a.dweight != nullptr, [&](auto dweight) RMSNORM_INLINE_LAMBDA {
      WithFlag(a.dbias != nullptr, [&](auto dbias) RMSNORM_INLINE_LAMBDA {
        const Kernel<T, decltype(weight)::value, decltype(dweight)::value, decltype(dbias)::value> kernel(
            p, plan, a, gain.data());
        RunRows(plan, bytes, kernel, &grads);
        grads.Reduce();
        if (!ParamGradsFinite(kernel, a.dweight, a.dbias, p.cols)) kernel.ResumParamGrads(a.dweight, a.dbias);
      });
    });
  });
}

}  // namespace rmsnorm::cpu

#endif  // RMSNORM_SRC_CPU_ROW_DRIVER_H_
