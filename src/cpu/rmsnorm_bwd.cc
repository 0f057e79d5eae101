// RMSNorm family backward (RMSNorm, pRMSNorm, L2-Norm), one fused kernel for dx, dweight and dbias.
//
//   u = dy * g,  xhat = x * rstd,  c = sum_{j<n}(u_j * xhat_j) / divisor
//   dx_i = rstd * (u_i - [i < k] * xhat_i * c)
//   dweight_i = sum_rows dy_i * xhat_i,  dbias_i = sum_rows dy_i
//
// Per row: a pass for sum(x^2) when rstd is recomputed, one for sum(u * xhat), and one (from cache)
// that writes dx and adds to the row block's parameter-gradient partials.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/rmsnorm_bwd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include "hwy/highway.h"
#include "cpu/convert-inl.h"
#include "cpu/loops-inl.h"
#include "cpu/sums-inl.h"
#include "cpu/norm_math-inl.h"
#include "cpu/row_groups-inl.h"

#include <algorithm>
#include <cmath>

#include "cpu/cpu.h"
#include "cpu/dispatch.h"
#include "cpu/rare_rows.h"
#include "cpu/row_driver.h"
#include "cpu/row_plan.h"
#include "cpu/row_tensor.h"
#include "cpu/statistics.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

struct RmsBackwardState {
  double sum_squares = 0.0;  // when recomputing rstd
  bool rstd_known = false;   // recomputed within the f32 path's range
  float rstd = 0.0f;
  double dot = 0.0;  // sum(u * xhat)
  uint32_t max_u_bits = 0;  // max|u| as bits (see AddMagnitudes)
  float c = 0.0f;    // dot / divisor
  bool rare = false;  // computed in double: see rare_rows.h
  double rare_rstd = 0.0;
  double rare_c = 0.0;
};

struct RmsBackwardPartial {
  double sum_squares = 0.0;
  double dot = 0.0;
  uint32_t max_u_bits = 0;
};

// dy, x, dx: (rows, cols) in T; weight: (cols) f32; rstd: (rows) f32 or null (recompute).
// Phases per row: the statistic (only when recomputing), then sum(u * xhat), then dx. The dot is taken
// over normalized values so its products have the size of u, whatever the row's magnitude.
template <class T, bool kWeight, bool kDweight, bool kDbias>
class RmsBackwardKernel {
 public:
  using Element = T;  // of the row tensors
  using State = RmsBackwardState;
  using Partial = RmsBackwardPartial;

  RmsBackwardKernel(const Problem& p, const RowPlan& plan, const BackwardArgs& a, const float* gain)
      : p_(p),
        plan_(plan),
        dy_(static_cast<const T*>(a.dy), p, registry::kDy),
        x_(static_cast<const T*>(a.x), p, registry::kX),
        gain_(gain),
        rstd_(a.rstd),
        dx_(static_cast<T*>(a.dx), p, registry::kDx),
        dx_in_place_(a.dx == a.dy || a.dx == a.x),
        xhat_bound_(2.0 * std::sqrt(double(p.divisor))) {}

  int num_phases() const { return recompute() ? 2 : 1; }

  Partial Reduce(int phase, int64_t row, int64_t c0, int64_t c1, const State& s) const {
    const T* x = x_.Row(row) + c0;
    Partial partial;
    if (IsStatsPhase(phase)) {
      const int64_t end = std::min(c1, p_.k);
      if (c0 < end) partial.sum_squares = SumSquares(x, size_t(end - c0), size_t(c1 - c0));
      return partial;
    }
    float rstd;
    if (!FastRstd(row, s, &rstd)) return partial;  // the rare path recomputes in double
    DotPass<1>(row, &rstd, c0, c1, &partial);
    return partial;
  }

  void Fold(int phase, State& s, const Partial& partial) const {
    if (IsStatsPhase(phase)) {
      s.sum_squares += partial.sum_squares;
    } else {
      s.dot += partial.dot;
      s.max_u_bits = std::max(s.max_u_bits, partial.max_u_bits);
    }
  }

  void Finish(int phase, int64_t row, State& s) const {
    if (IsStatsPhase(phase)) {
      double rstd = 0.0;
      s.rstd_known = RmsInverseRoot(p_, s.sum_squares, &rstd);
      s.rstd = static_cast<float>(rstd);
      return;
    }
    float rstd;
    const double c = DivideBy(s.dot, p_.divisor);
    // Below k, |x-hat| <= xhat_bound_ for the forward's rstd or one within a factor of 2 of it (the
    // header's contract), so x-hat * c stays below 2^126 unless |c| is near f32's top. With |u| below
    // 2^126 too, u - x-hat * c cannot overflow before rstd scales it, even where rstd < 1 would bring
    // dx back into range. A row outside those bounds, or whose c is not finite, is computed in double.
    if (FastRstd(row, s, &rstd) && MagnitudeBelow2p126(s.max_u_bits) && std::fabs(c) * xhat_bound_ < 0x1p126) {
      s.rstd = rstd;
      s.c = static_cast<float>(c);
      return;
    }
    s.rare = true;
    const T* x = x_.Row(row);
    const T* dy = dy_.Row(row);
    s.rare_rstd = rstd_ != nullptr && SavedRstdUsable(rstd_[row])
                      ? double(rstd_[row])
                      : RmsInverseRootDouble(x, p_);
    s.rare_c = formula::RmsBackwardCoefficient(p_, RowOf(dy), RowOf(x), GainOf(gain_), s.rare_rstd);
  }

  // After the call's sums: the columns of dweight and dbias that left f32, again in double with the
  // rstd the reference takes.
  // Only out of place: in place, dx has overwritten dy or x by now, and such columns keep their f32
  // sums (+-inf or NaN), as the header says.
  void ResumParamGrads(float* dweight, float* dbias) const {
    if (dx_in_place_) return;
    const auto stats = [&](int64_t row, const T* x, double* mean, double* rstd) {
      *mean = 0.0;
      *rstd = rstd_ != nullptr && SavedRstdUsable(rstd_[row]) ? double(rstd_[row]) : RmsInverseRootDouble(x, p_);
    };
    ResumParamGradColumns(p_, dy_, x_, stats, kDweight ? dweight : nullptr, kDbias ? dbias : nullptr);
  }

  void PrefetchRows(int64_t first, int64_t count) const {
    PrefetchInputRows(first, count, p_.cols, plan_.prefetch_into_l1, dy_, &x_);
  }

  void Output(int64_t row, int64_t c0, int64_t c1, const State& s, float* dw, float* db) const {
    if (s.rare) return RareOutput(row, c0, c1, s, dw, db);
    const DF d;
    const VF rstd = hn::Set(d, s.rstd);
    const VF c = hn::Set(d, s.c);
    const T* dy = dy_.Row(row) + c0;
    const T* x = x_.Row(row) + c0;
    T* dx = dx_.Row(row) + c0;
    const float* w = gain_ + (kWeight ? c0 : 0);
    // Only columns below k get the correction: the coefficient is c there and 0 past k.
    const size_t corrected = size_t(std::clamp(p_.k, c0, c1) - c0);
    const OutputHints<T> hints = HintsFor(plan_, dx_in_place_, row, c0, dy_, &x_);
    ForEachOutput(d, dx, size_t(c1 - c0), hints, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA {
      const VF g = Gain<kWeight>(d, w, i, count);
      const VF dyv = Load(d, dy + i, count);
      const VF xhat = hn::Mul(Load(d, x + i, count), rstd);
      if constexpr (kDweight) AccumulateInto(d, hn::Mul(dyv, xhat), dw + c0 + i, count);
      if constexpr (kDbias) AccumulateInto(d, dyv, db + c0 + i, count);
      return Dx(hn::Mul(dyv, g), xhat, rstd, BelowLimit(d, c, i, corrected));
    });
  }

  // Reduce of rows `row` and row + 1, whole, in one pass that reads a column's gain once for both (see
  // RunRowPair, row_groups-inl.h): the dot's phase, where neither row takes the double path. It issues
  // the next pair's prefetches as well (see DotPass).
  bool ReducePair(int phase, int64_t row, const State* s, Partial* partials) const {
    float rstds[2];
    if (IsStatsPhase(phase) || !FastRstd(row, s[0], &rstds[0]) || !FastRstd(row + 1, s[1], &rstds[1])) return false;
    DotPass<2>(row, rstds, 0, p_.cols, partials);
    return true;
  }

  // Output of rows `row` and row + 1, whole, in one pass (see RunRowPair): the gain and the dweight and
  // dbias partials of a column are read once for both rows, and the partials take row's term and then
  // row + 1's (prefetches: PairHintsFor). False for a row on the double path, or where ForEachOutputPair
  // declines the pair (rows at different offsets from a cache line).
  bool OutputPair(int64_t row, const State& s0, const State& s1, float* dw, float* db) const {
    if (s0.rare || s1.rare) return false;
    const int64_t cols = p_.cols;
    const DF d;
    const VF rstd0 = hn::Set(d, s0.rstd), rstd1 = hn::Set(d, s1.rstd);
    const VF c0 = hn::Set(d, s0.c), c1 = hn::Set(d, s1.c);
    const T *dy0 = dy_.Row(row), *dy1 = dy_.Row(row + 1), *x0 = x_.Row(row), *x1 = x_.Row(row + 1);
    const size_t corrected = size_t(std::clamp<int64_t>(p_.k, 0, cols));
    const PairHints<T> hints = PairHintsFor(plan_, dx_in_place_, row, dy_, &x_);
    return ForEachOutputPair(d, dx_.Row(row), dx_.Row(row + 1), size_t(cols), hints,
                             [&](size_t i, size_t count, VF& dx0, VF& dx1) RMSNORM_INLINE_LAMBDA {
                               const VF g = Gain<kWeight>(d, gain_, i, count);
                               const VF dyv0 = Load(d, dy0 + i, count), dyv1 = Load(d, dy1 + i, count);
                               const VF xhat0 = hn::Mul(Load(d, x0 + i, count), rstd0);
                               const VF xhat1 = hn::Mul(Load(d, x1 + i, count), rstd1);
                               if constexpr (kDweight)
                                 AccumulateTwoInto(d, hn::Mul(dyv0, xhat0), hn::Mul(dyv1, xhat1), dw + i, count);
                               if constexpr (kDbias) AccumulateTwoInto(d, dyv0, dyv1, db + i, count);
                               dx0 = Dx(hn::Mul(dyv0, g), xhat0, rstd0, BelowLimit(d, c0, i, corrected));
                               dx1 = Dx(hn::Mul(dyv1, g), xhat1, rstd1, BelowLimit(d, c1, i, corrected));
                             });
  }

 private:
  // u = dy * g and x-hat to dx, with c the row's coefficient for the column (0 past k).
  static HWY_INLINE VF Dx(VF u, VF xhat, VF rstd, VF c) { return hn::Mul(rstd, hn::Sub(u, hn::Mul(xhat, c))); }

  // The dot's pass over columns [c0, c1) of kRows = 1 or 2 rows from `row`, the row + r with rstd[r]:
  // each row's sum(u * x-hat) and max|u|, in the canonical order each, so two rows at once give the
  // bits of one after the other.
  template <size_t kRows>
  void DotPass(int64_t row, const float* rstd, int64_t c0, int64_t c1, Partial* partials) const {
    static_assert(kRows == 1 || kRows == 2, "one row or a pair");
    const DF d;
    const float* w = gain_ + (kWeight ? c0 : 0);
    const T* dy0 = dy_.Row(row) + c0;
    const T* x0 = x_.Row(row) + c0;
    const T* dy1 = dy_.Row(row + kRows - 1) + c0;
    const T* x1 = x_.Row(row + kRows - 1) + c0;
    const VF r0 = hn::Set(d, rstd[0]), r1 = hn::Set(d, rstd[kRows - 1]);
    auto max_u0 = hn::Zero(DI32()), max_u1 = max_u0;
    // u * x-hat of one row's columns [i, i + count), with |u| added to max_u.
    const auto product = [&](const T* dy, const T* x, VF g, VF r, size_t i, size_t count,
                             hn::Vec<DI32>& max_u) RMSNORM_INLINE_LAMBDA {
      const VF u = hn::Mul(Load(d, dy + i, count), g);
      max_u = AddMagnitudes(max_u, u, count);
      return hn::Mul(u, hn::Mul(Load(d, x + i, count), r));
    };
    const size_t n = size_t(c1 - c0);
    if constexpr (kRows == 1) {
      partials[0].dot = Sum(d, n, [&](size_t i, size_t count, VF& p) RMSNORM_INLINE_LAMBDA {
        p = product(dy0, x0, Gain<kWeight>(d, w, i, count), r0, i, count, max_u0);
      });
    } else {
      // For rows from memory, the next pair's prefetches, which OutputPair issues, go out from this
      // pass too: issued twice, more of their lines come in time (the Zen 4 drops some prefetches, says
      // perf-log.md's session 23), and the f32 backward took 0.90-0.96x the time there (the commit says
      // by how much). From this pass alone they gained nothing, and from the last-level cache the second
      // prefetches cost 1.03x.
      PairHints<T> next;
      if (plan_.prefetch_from_memory) next = PairHintsFor(plan_, dx_in_place_, row, dy_, &x_);
      float dot0, dot1;
      Sum2(
          d, n,
          [&](size_t i, size_t count, VF& p0, VF& p1) RMSNORM_INLINE_LAMBDA {
            if (i < n) {
              PrefetchNextRow(next.first, i);
              PrefetchNextRow(next.second, i);
            }
            const VF g = Gain<kWeight>(d, w, i, count);
            p0 = product(dy0, x0, g, r0, i, count, max_u0);
            p1 = product(dy1, x1, g, r1, i, count, max_u1);
          },
          &dot0, &dot1);
      partials[0].dot = dot0;
      partials[1].dot = dot1;
      partials[1].max_u_bits = MaxOfMagnitudes(max_u1);
    }
    partials[0].max_u_bits = MaxOfMagnitudes(max_u0);
  }

  // Out of line and not vectorized, as RareForwardRow (see rare_rows.h).
  RMSNORM_RARE_ROW_FUNCTION void RareOutput(int64_t row, int64_t c0, int64_t c1, const State& s, float* dw,
                                            float* db) const {
    const T* dy_row = dy_.Row(row);
    const T* x_row = x_.Row(row);
    T* dx_row = dx_.Row(row);
    for (int64_t i = c0; i < c1; ++i) {
      const double dy = ToDouble(dy_row[i]), x = ToDouble(x_row[i]);
      StoreDouble(formula::RmsDx(p_, i, dy, x, GainDouble(gain_, i), s.rare_rstd, s.rare_c), dx_row + i);
      if constexpr (kDweight) dw[i] += static_cast<float>(formula::DweightTerm(dy, x, 0.0, s.rare_rstd));
      if constexpr (kDbias) db[i] += static_cast<float>(dy);
    }
  }

  bool recompute() const { return rstd_ == nullptr; }
  bool IsStatsPhase(int phase) const { return recompute() && phase == 0; }

  // The rstd the f32 path uses for this row, or false if the row takes the rare path.
  bool FastRstd(int64_t row, const State& s, float* rstd) const {
    if (recompute()) {
      *rstd = s.rstd;
      return s.rstd_known;
    }
    *rstd = rstd_[row];
    return SavedRstdUsable(*rstd) && *rstd <= kMaxF32Rstd;
  }

  const Problem& p_;
  const RowPlan& plan_;
  RowTensor<const T> dy_;
  RowTensor<const T> x_;
  const float* gain_;  // (cols), see ColumnParam (row_driver.h)
  const float* rstd_;
  RowTensor<T> dx_;
  bool dx_in_place_;
  double xhat_bound_;  // 2 sqrt(divisor)
};

static void RmsBackwardImpl(const Problem& p, const BackwardArgs& a) {
  RunBackward<RmsBackwardKernel, KernelDtypeStorage>(p, a);
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rmsnorm::cpu {
HWY_EXPORT(RmsBackwardImpl);
void RMSNORM_PER_KERNEL_DTYPE(RmsBackward)(const Problem& p, const BackwardArgs& args) {
  RMSNORM_DYNAMIC_DISPATCH(RmsBackwardImpl)(p, args);
}
}  // namespace rmsnorm::cpu
#endif
