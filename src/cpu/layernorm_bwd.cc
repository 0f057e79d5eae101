// LayerNorm backward, one fused kernel for dx, dweight and dbias.
//
//   u = dy * g,  xhat = (x - mean) * rstd
//   dx_i = rstd * (u_i - mean(u) - xhat_i * mean(u * xhat))
//   dweight_i = sum_rows dy_i * xhat_i,  dbias_i = sum_rows dy_i
//
// Phases per row: the moments (only when mean and rstd are recomputed), then sum(u) and sum(u * xhat),
// then dx and the row block's parameter-gradient partials.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/layernorm_bwd.cc"
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

struct LayerNormBackwardState {
  Moments moments;  // when recomputing
  bool stats_known = false;
  SplitMean mean;
  float rstd = 0.0f;
  double sum_u = 0.0;
  double sum_u_xhat = 0.0;
  uint32_t max_u_bits = 0;  // max|u| as bits (see AddMagnitudes)
  float mean_u = 0.0f;
  float mean_u_xhat = 0.0f;
  bool rare = false;  // computed in double: see rare_rows.h
  double rare_mean = 0.0, rare_rstd = 0.0, rare_mean_u = 0.0, rare_mean_u_xhat = 0.0;
};

struct LayerNormBackwardPartial {
  Moments moments;
  double sum_u = 0.0;
  double sum_u_xhat = 0.0;
  uint32_t max_u_bits = 0;
};

// dy, x, dx: (rows, cols) in T; weight: (cols) f32; mean, rstd: (rows) f32, or both null (recompute).
template <class T, bool kWeight, bool kDweight, bool kDbias>
class LayerNormBackwardKernel {
 public:
  using Element = T;  // of the row tensors
  using State = LayerNormBackwardState;
  using Partial = LayerNormBackwardPartial;

  LayerNormBackwardKernel(const Problem& p, const RowPlan& plan, const BackwardArgs& a, const float* gain)
      : p_(p),
        plan_(plan),
        dy_(static_cast<const T*>(a.dy), p, registry::kDy),
        x_(static_cast<const T*>(a.x), p, registry::kX),
        gain_(gain),
        mean_(a.mean),
        rstd_(a.rstd),
        dx_(static_cast<T*>(a.dx), p, registry::kDx),
        dx_in_place_(a.dx == a.dy || a.dx == a.x),
        xhat_bound_(2.0 * std::sqrt(double(p.cols))) {}

  int num_phases() const { return recompute() ? 2 : 1; }

  Partial Reduce(int phase, int64_t row, int64_t c0, int64_t c1, const State& s) const {
    const T* x = x_.Row(row) + c0;
    Partial partial;
    if (IsStatsPhase(phase)) {
      partial.moments = ChunkMoments(x, size_t(c1 - c0));
      return partial;
    }
    SplitMean mean;
    float rstd;
    if (!FastStats(row, s, &mean, &rstd)) return partial;  // the rare path recomputes in double
    const DF d;
    const VF mean_hi = hn::Set(d, mean.hi), mean_lo = hn::Set(d, mean.lo), r = hn::Set(d, rstd);
    const T* dy = dy_.Row(row) + c0;
    const float* w = gain_ + (kWeight ? c0 : 0);
    float sum_u, sum_u_xhat;
    auto max_u = hn::Zero(DI32());
    Sum2(
        d, size_t(c1 - c0),
        [&](size_t i, size_t count, VF& u, VF& u_xhat) RMSNORM_INLINE_LAMBDA {
          u = hn::Mul(Load(d, dy + i, count), Gain<kWeight>(d, w, i, count));
          const VF xhat = hn::Mul(Centered(Load(d, x + i, count), mean_hi, mean_lo), r);
          u_xhat = hn::Mul(u, xhat);  // u is 0 past count
          max_u = AddMagnitudes(max_u, u, count);
        },
        &sum_u, &sum_u_xhat);
    partial.sum_u = sum_u;
    partial.sum_u_xhat = sum_u_xhat;
    partial.max_u_bits = MaxOfMagnitudes(max_u);
    return partial;
  }

  void Fold(int phase, State& s, const Partial& part) const {
    if (IsStatsPhase(phase)) return FoldMoments(s.moments, part.moments);
    s.sum_u += part.sum_u;
    s.sum_u_xhat += part.sum_u_xhat;
    s.max_u_bits = std::max(s.max_u_bits, part.max_u_bits);
  }

  void Finish(int phase, int64_t row, State& s) const {
    if (IsStatsPhase(phase)) {
      double rstd = 0.0;
      s.stats_known = MomentsInverseRoot(s.moments, p_.eps, &rstd);
      s.mean = Split(s.moments.mean);
      s.rstd = static_cast<float>(rstd);
      return;
    }
    SplitMean mean;
    float rstd;
    const double mean_u = DivideBy(s.sum_u, p_.cols), mean_u_xhat = DivideBy(s.sum_u_xhat, p_.cols);
    // |x-hat| <= xhat_bound_ for the forward's statistics or an rstd within a factor of 2 of them (the
    // header's contract), so x-hat * mean(u x-hat) stays below 2^126 unless that mean is near f32's
    // top. With |u| and so |mean(u)| below 2^126 too, u - mean(u) - x-hat * mean(u x-hat) cannot
    // overflow before rstd scales it, even where rstd < 1 would bring dx back into range. A row
    // outside those bounds, or whose means are not finite, is computed in double.
    if (FastStats(row, s, &mean, &rstd) && MagnitudeBelow2p126(s.max_u_bits) &&
        std::isfinite(static_cast<float>(mean_u)) && std::fabs(mean_u_xhat) * xhat_bound_ < 0x1p126) {
      s.mean = mean;
      s.rstd = rstd;
      s.mean_u = static_cast<float>(mean_u);
      s.mean_u_xhat = static_cast<float>(mean_u_xhat);
      return;
    }
    s.rare = true;
    const T* x = x_.Row(row);
    const T* dy = dy_.Row(row);
    if (!recompute() && SavedLayerStatsUsable(mean_[row], rstd_[row])) {
      s.rare_mean = mean_[row];
      s.rare_rstd = rstd_[row];
    } else {
      LayerStatsDouble(x, p_, &s.rare_mean, &s.rare_rstd);
    }
    formula::LayerBackwardMeans(p_, RowOf(dy), RowOf(x), GainOf(gain_), s.rare_mean, s.rare_rstd, &s.rare_mean_u,
                                &s.rare_mean_u_xhat);
  }

  // After the call's sums: the columns of dweight and dbias that left f32, again in double with the
  // statistics the reference takes.
  // Only out of place: in place, dx has overwritten dy or x by now, and such columns keep their f32
  // sums (+-inf or NaN), as the header says.
  void ResumParamGrads(float* dweight, float* dbias) const {
    if (dx_in_place_) return;
    const auto stats = [&](int64_t row, const T* x, double* mean, double* rstd) {
      if (!recompute() && SavedLayerStatsUsable(mean_[row], rstd_[row])) {
        *mean = mean_[row];
        *rstd = rstd_[row];
      } else {
        LayerStatsDouble(x, p_, mean, rstd);
      }
    };
    ResumParamGradColumns(p_, dy_, x_, stats, kDweight ? dweight : nullptr, kDbias ? dbias : nullptr);
  }

  void PrefetchRows(int64_t first, int64_t count) const {
    PrefetchInputRows(first, count, p_.cols, plan_.prefetch_into_l1, dy_, &x_);
  }

  void Output(int64_t row, int64_t c0, int64_t c1, const State& s, float* dw, float* db) const {
    if (s.rare) return RareOutput(row, c0, c1, s, dw, db);
    const DF d;
    const VF mean_hi = hn::Set(d, s.mean.hi), mean_lo = hn::Set(d, s.mean.lo);
    const VF rstd = hn::Set(d, s.rstd);
    const VF mean_u = hn::Set(d, s.mean_u);
    const VF mean_u_xhat = hn::Set(d, s.mean_u_xhat);
    const T* dy = dy_.Row(row) + c0;
    const T* x = x_.Row(row) + c0;
    T* dx = dx_.Row(row) + c0;
    const float* w = gain_ + (kWeight ? c0 : 0);
    const OutputHints<T> hints = HintsFor(plan_, dx_in_place_, row, c0, dy_, &x_);
    ForEachOutput(d, dx, size_t(c1 - c0), hints, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA {
      const VF dyv = Load(d, dy + i, count);
      const VF xhat = hn::Mul(Centered(Load(d, x + i, count), mean_hi, mean_lo), rstd);
      if constexpr (kDweight) AccumulateInto(d, hn::Mul(dyv, xhat), dw + c0 + i, count);
      if constexpr (kDbias) AccumulateInto(d, dyv, db + c0 + i, count);
      return Dx(hn::Mul(dyv, Gain<kWeight>(d, w, i, count)), xhat, rstd, mean_u, mean_u_xhat);
    });
  }

  // Output of rows `row` and row + 1, whole, in one pass (see RunRowPair, row_groups-inl.h): the gain and
  // the dweight and dbias partials of a column are read once for both rows, and the partials take row's
  // term and then row + 1's (prefetches: PairHintsFor). False for a row on the double path, or where
  // ForEachOutputPair declines the pair (rows at different offsets from a cache line).
  bool OutputPair(int64_t row, const State& s0, const State& s1, float* dw, float* db) const {
    if (s0.rare || s1.rare) return false;
    const int64_t cols = p_.cols;
    const DF d;
    const VF mean_hi0 = hn::Set(d, s0.mean.hi), mean_lo0 = hn::Set(d, s0.mean.lo), rstd0 = hn::Set(d, s0.rstd);
    const VF mean_hi1 = hn::Set(d, s1.mean.hi), mean_lo1 = hn::Set(d, s1.mean.lo), rstd1 = hn::Set(d, s1.rstd);
    const VF mean_u0 = hn::Set(d, s0.mean_u), mean_u_xhat0 = hn::Set(d, s0.mean_u_xhat);
    const VF mean_u1 = hn::Set(d, s1.mean_u), mean_u_xhat1 = hn::Set(d, s1.mean_u_xhat);
    const T *dy0 = dy_.Row(row), *dy1 = dy_.Row(row + 1), *x0 = x_.Row(row), *x1 = x_.Row(row + 1);
    const PairHints<T> hints = PairHintsFor(plan_, dx_in_place_, row, dy_, &x_);
    return ForEachOutputPair(d, dx_.Row(row), dx_.Row(row + 1), size_t(cols), hints,
                             [&](size_t i, size_t count, VF& dx0, VF& dx1) RMSNORM_INLINE_LAMBDA {
                               const VF g = Gain<kWeight>(d, gain_, i, count);
                               const VF dyv0 = Load(d, dy0 + i, count), dyv1 = Load(d, dy1 + i, count);
                               const VF xhat0 = hn::Mul(Centered(Load(d, x0 + i, count), mean_hi0, mean_lo0), rstd0);
                               const VF xhat1 = hn::Mul(Centered(Load(d, x1 + i, count), mean_hi1, mean_lo1), rstd1);
                               if constexpr (kDweight)
                                 AccumulateTwoInto(d, hn::Mul(dyv0, xhat0), hn::Mul(dyv1, xhat1), dw + i, count);
                               if constexpr (kDbias) AccumulateTwoInto(d, dyv0, dyv1, db + i, count);
                               dx0 = Dx(hn::Mul(dyv0, g), xhat0, rstd0, mean_u0, mean_u_xhat0);
                               dx1 = Dx(hn::Mul(dyv1, g), xhat1, rstd1, mean_u1, mean_u_xhat1);
                             });
  }

 private:
  // u = dy * g and x-hat to dx.
  static HWY_INLINE VF Dx(VF u, VF xhat, VF rstd, VF mean_u, VF mean_u_xhat) {
    return hn::Mul(rstd, hn::Sub(hn::Sub(u, mean_u), hn::Mul(xhat, mean_u_xhat)));
  }

  bool recompute() const { return rstd_ == nullptr; }
  bool IsStatsPhase(int phase) const { return recompute() && phase == 0; }

  // The mean and rstd the f32 path uses for this row, or false if the row takes the rare path. A saved
  // mean is one f32: its lo part is 0.
  bool FastStats(int64_t row, const State& s, SplitMean* mean, float* rstd) const {
    if (recompute()) {
      *mean = s.mean;
      *rstd = s.rstd;
      return s.stats_known;
    }
    mean->hi = mean_[row];
    mean->lo = 0.0f;
    *rstd = rstd_[row];
    return SavedLayerStatsUsable(mean->hi, *rstd) && *rstd <= kMaxF32Rstd;
  }

  // Out of line and not vectorized, as RareForwardRow (see rare_rows.h).
  RMSNORM_RARE_ROW_FUNCTION void RareOutput(int64_t row, int64_t c0, int64_t c1, const State& s, float* dw,
                                            float* db) const {
    const T* dy_row = dy_.Row(row);
    const T* x_row = x_.Row(row);
    T* dx_row = dx_.Row(row);
    for (int64_t i = c0; i < c1; ++i) {
      const double dy = ToDouble(dy_row[i]), x = ToDouble(x_row[i]);
      StoreDouble(formula::LayerDx(dy, x, GainDouble(gain_, i), s.rare_mean, s.rare_rstd, s.rare_mean_u,
                                   s.rare_mean_u_xhat),
                  dx_row + i);
      if constexpr (kDweight) dw[i] += static_cast<float>(formula::DweightTerm(dy, x, s.rare_mean, s.rare_rstd));
      if constexpr (kDbias) db[i] += static_cast<float>(dy);
    }
  }

  const Problem& p_;
  const RowPlan& plan_;
  RowTensor<const T> dy_;
  RowTensor<const T> x_;
  const float* gain_;  // (cols), see ColumnParam (row_driver.h)
  const float* mean_;
  const float* rstd_;
  RowTensor<T> dx_;
  bool dx_in_place_;
  double xhat_bound_;  // 2 sqrt(cols)
};

static void LayerNormBackwardImpl(const Problem& p, const BackwardArgs& a) {
  RunBackward<LayerNormBackwardKernel, KernelDtypeStorage>(p, a);
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rmsnorm::cpu {
HWY_EXPORT(LayerNormBackwardImpl);
void RMSNORM_PER_KERNEL_DTYPE(LayerNormBackward)(const Problem& p, const BackwardArgs& args) {
  RMSNORM_DYNAMIC_DISPATCH(LayerNormBackwardImpl)(p, args);
}
}  // namespace rmsnorm::cpu
#endif
