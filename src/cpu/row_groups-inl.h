// The non-split path's rows, compiled once per Highway target: a block's rows one at a time, in groups
// (see RunRowGroup) or in pairs (see RunRowPairs). Per target, unlike the rest of the scheduler
// (row_driver.h), so that a kernel's Reduce, Fold, Finish and Output can inline into the loop over
// rows: code compiled for the baseline cannot inline target code, and for short rows the four calls per
// row cost about as much as the row's own vector work. Which parts of the cut decide bits: see
// row_driver.h.

// Per-target include guard, the Highway way.
#if defined(RMSNORM_SRC_CPU_ROW_GROUPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef RMSNORM_SRC_CPU_ROW_GROUPS_INL_H_
#undef RMSNORM_SRC_CPU_ROW_GROUPS_INL_H_
#else
#define RMSNORM_SRC_CPU_ROW_GROUPS_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <new>
#include <type_traits>

#include "cpu/dispatch.h"
#include "cpu/row_plan.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

// Whether a kernel gives the one-row path an Output of its own, `void OutputRow(...) const` with
// Output's arguments: work that pays off on long rows only, which the grouped loop would carry inlined.
// Declared by the kernel itself: one inherited from a base class would run the base's Output.
template <class K, class = void>
constexpr bool kHasOutputRow = false;
template <class K>
constexpr bool kHasOutputRow<K, std::void_t<decltype(&K::OutputRow)>> =
    std::is_same_v<decltype(&K::OutputRow),
                   void (K::*)(int64_t, int64_t, int64_t, const typename K::State&, float*, float*) const>;

// Whether a kernel runs a group of rows itself, `template <int64_t kRows> bool RunGroup(int64_t first,
// int64_t count) const`, where it can skip per-row work its short rows do not need; it returns false to
// leave the group to RunRowGroup. Declared by the kernel itself, as OutputRow.
template <class K, class = void>
constexpr bool kHasRunGroup = false;
template <class K>
constexpr bool kHasRunGroup<K, std::void_t<decltype(&K::template RunGroup<1>)>> =
    std::is_same_v<decltype(&K::template RunGroup<1>), bool (K::*)(int64_t, int64_t) const>;

// Whether a kernel writes two rows in one pass, `bool OutputPair(int64_t row, const State& s0, const
// State& s1, float* dw, float* db) const`: bit for bit Output of row and then of row + 1, whole rows of
// one chunk (see RunRowPairs), or false, having written nothing, where they must go one at a time.
// Declared by the kernel itself, as OutputRow.
template <class K, class = void>
constexpr bool kHasOutputPair = false;
template <class K>
constexpr bool kHasOutputPair<K, std::void_t<decltype(&K::OutputPair)>> =
    std::is_same_v<decltype(&K::OutputPair), bool (K::*)(int64_t, const typename K::State&, const typename K::State&,
                                                         float*, float*) const>;

// Whether it reduces two rows in one pass too, `bool ReducePair(int phase, int64_t row, const State*
// states, Partial* partials) const`: bit for bit Reduce of the whole rows row and row + 1 into
// partials[0] and [1], or false, having written nothing, for a phase it leaves to Reduce.
template <class K, class = void>
constexpr bool kHasReducePair = false;
template <class K>
constexpr bool kHasReducePair<K, std::void_t<decltype(&K::ReducePair)>> =
    std::is_same_v<decltype(&K::ReducePair),
                   bool (K::*)(int, int64_t, const typename K::State*, typename K::Partial*) const>;

// Rows [first, first + rows) of one block, rows <= kRows, on the non-split path: each phase's
// reductions of every row, then their finishes, and then their outputs, in row order. A narrow row's
// statistic ends in a chain of dependent latencies (the lanes' sum, the fold, a divide and a square
// root) longer than its vector work; a group lets the core overlap one row's chain with the next rows'
// loads. Every row does the same operations in the same order as alone, and the outputs (which add to
// the parameter-gradient partials) still run in row order, so no bit depends on the grouping.
template <int64_t kRows, class Kernel>
HWY_INLINE void RunRowGroup(const RowPlan& plan, const Kernel& kernel, int64_t first, int64_t rows, float* dw,
                            float* db) {
  const int64_t count = kRows == 1 ? 1 : rows;  // one row: the loops below fold away
  // A group's rows are one chunk each (MakePlan groups short rows only). Said at compile time, the
  // chunk loops and bounds fold away, which short rows measured faster (the commit says by how much).
  static_assert(kMaxGroupedRowBytes / 2 <= kChunk, "a grouped row of 16-bit values is one chunk");
  const int64_t chunks = kRows == 1 ? plan.num_chunks : 1;
  const auto chunk_begin = [&](int64_t c) { return kRows == 1 ? plan.ChunkBegin(c) : 0; };
  const auto chunk_end = [&](int64_t c) { return kRows == 1 ? plan.ChunkEnd(c) : plan.cols; };
  // Each row's state is made where its first reduction starts. Zeroed as one array up front, GCC wrote
  // it with a string store, and a loop of assignments alone became a call to memset; both measured
  // slower on short rows (the commit says by how much).
  using State = typename Kernel::State;
  static_assert(std::is_trivially_destructible_v<State>, "states are left without destruction");
  union Storage {
    Storage() {}
    State states[kRows];
  } storage;
  State* states = storage.states;
  for (int phase = 0; phase < kernel.num_phases(); ++phase) {
    for (int64_t r = 0; r < count; ++r) {
      if (phase == 0) new (&states[r]) State();
      for (int64_t c = 0; c < chunks; ++c)
        kernel.Fold(phase, states[r], kernel.Reduce(phase, first + r, chunk_begin(c), chunk_end(c), states[r]));
    }
    for (int64_t r = 0; r < count; ++r) kernel.Finish(phase, first + r, states[r]);
  }
  for (int64_t r = 0; r < count; ++r) {
    for (int64_t c = 0; c < chunks; ++c) {
      if constexpr (kRows == 1 && kHasOutputRow<Kernel>) {
        kernel.OutputRow(first + r, chunk_begin(c), chunk_end(c), states[r], dw, db);
      } else {
        kernel.Output(first + r, chunk_begin(c), chunk_end(c), states[r], dw, db);
      }
    }
  }
}

// Rows [begin, end) of one block in groups of plan.group_rows. Flattened: the kernel's members inline
// into the group's loops (their out-of-line rare paths stay out of line), which short rows need; long
// rows, one at a time below, gain nothing from it but code size. x86 only, where it was measured; the
// sanitizer builds (GCC's ASan, clang's TSan and fuzzer), which check what the code does rather than
// how fast, skip it too: it lengthens the compile of the longest files.
#if !HWY_ARCH_X86 || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RMSNORM_FLATTEN
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RMSNORM_FLATTEN
#endif
#endif
#ifndef RMSNORM_FLATTEN
#define RMSNORM_FLATTEN [[gnu::flatten]]
#endif
template <class Kernel>
RMSNORM_FLATTEN void RunRowGroups(const RowPlan& plan, const Kernel& kernel, int64_t begin, int64_t end, float* dw,
                                   float* db) {
  // The most rows MakePlan groups for the kernel's storage type: room for more measured slower.
  constexpr int64_t kMaxRows = kGroupRows * GroupScale(StorageOf<typename Kernel::Element>::dtype);
  HWY_DASSERT(plan.group_rows <= kMaxRows);
  for (int64_t first = begin; first < end; first += plan.group_rows) {
    const int64_t count = std::min(plan.group_rows, end - first);
    if constexpr (kHasRunGroup<Kernel>) {
      if (kernel.template RunGroup<kMaxRows>(first, count)) continue;
    }
    RunRowGroup<kMaxRows>(plan, kernel, first, count, dw, db);
  }
}

// RunRowGroups group by group, each after the prefetch of a group further down (see
// RowPlan::group_prefetch_rows_ahead) by the kernel's `void PrefetchRows(int64_t first, int64_t count)
// const`, which every kernel has (its inputs' rows). Apart, so that RunRowGroups stays the same code
// for rows in cache: with the prefetch inside its loop, LayerNorm's bf16 4096x128 forward measured 0.93x.
template <class Kernel>
void RunRowGroupsPrefetching(const RowPlan& plan, const Kernel& kernel, int64_t begin, int64_t end, float* dw,
                             float* db) {
  for (int64_t first = begin; first < end; first += plan.group_rows) {
    const int64_t count = std::min(plan.group_rows, end - first);
    const int64_t ahead = first + plan.group_prefetch_rows_ahead;
    if (ahead < plan.rows) kernel.PrefetchRows(ahead, std::min(count, plan.rows - ahead));
    RunRowGroups(plan, kernel, first, first + count, dw, db);
  }
}

// Rows `row` and row + 1 of a block, whole rows of one chunk each: each phase's reductions (in one pass
// where the kernel has ReducePair), then both rows written in one pass (Kernel::OutputPair) or, where
// the kernel declines, one after the other. The same bits as RunRowGroup<1> on each row.
template <class Kernel>
HWY_INLINE void RunRowPair(const RowPlan& plan, const Kernel& kernel, int64_t row, float* dw, float* db) {
  typename Kernel::State states[2];
  for (int phase = 0; phase < kernel.num_phases(); ++phase) {
    typename Kernel::Partial partials[2];
    bool paired = false;
    if constexpr (kHasReducePair<Kernel>) paired = kernel.ReducePair(phase, row, states, partials);
    for (int64_t r = 0; r < 2; ++r)
      kernel.Fold(phase, states[r], paired ? partials[r] : kernel.Reduce(phase, row + r, 0, plan.cols, states[r]));
    for (int64_t r = 0; r < 2; ++r) kernel.Finish(phase, row + r, states[r]);
  }
  if (kernel.OutputPair(row, states[0], states[1], dw, db)) return;
  for (int64_t r = 0; r < 2; ++r) kernel.Output(row + r, 0, plan.cols, states[r], dw, db);
}

// Rows [begin, end) of one block that stream from memory, a chunk each, two at a time for a kernel that
// writes two rows in one pass (kHasOutputPair): a column's gain and parameter-gradient partials are
// then read once per pair of rows rather than once per row, which leaves more of a core's memory
// requests to the rows' own traffic (the f32 backward measured faster so on the Zen 4; the commit says
// by how much). A block of an odd number of rows ends with one row alone.
template <class Kernel>
void RunRowPairs(const RowPlan& plan, const Kernel& kernel, int64_t begin, int64_t end, float* dw, float* db) {
  HWY_DASSERT(plan.num_chunks == 1);
  int64_t row = begin;
  for (; row + 1 < end; row += 2) RunRowPair(plan, kernel, row, dw, db);
  if (row < end) RunRowGroup<1>(plan, kernel, row, 1, dw, db);
}

// Rows [begin, end) of one block, adding to the block's parameter-gradient partials dw and db (or
// null). Called by RunRows (row_driver.h), which finds it through the kernel's namespace.
template <class Kernel>
void RunBlockRows(const RowPlan& plan, const Kernel& kernel, int64_t begin, int64_t end, float* dw, float* db) {
  if (plan.group_prefetch_rows_ahead != 0) return RunRowGroupsPrefetching(plan, kernel, begin, end, dw, db);
  if (plan.group_rows > 1) return RunRowGroups(plan, kernel, begin, end, dw, db);
  if constexpr (kHasOutputPair<Kernel>) {
    if (plan.pair_rows) return RunRowPairs(plan, kernel, begin, end, dw, db);
  }
  for (int64_t row = begin; row < end; ++row) RunRowGroup<1>(plan, kernel, row, 1, dw, db);
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
