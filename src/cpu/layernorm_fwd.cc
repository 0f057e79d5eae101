// LayerNorm forward, the baseline, built to the same standard as RMSNorm.
//
//   mean, var of x (chunk moments combined in double),  rstd = 1 / sqrt(var + eps)
//   y = (x - mean) * rstd * g (+ b)
//
// Per row: two passes over each chunk for its moments (the second from cache), one to write y.
// That extra pass over RMSNorm's two is the re-centering the paper drops.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/layernorm_fwd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include "hwy/highway.h"
#include "cpu/convert-inl.h"
#include "cpu/loops-inl.h"
#include "cpu/sums-inl.h"
#include "cpu/norm_math-inl.h"
#include "cpu/row_groups-inl.h"
#include "cpu/bf16_pairs-inl.h"
#include "cpu/stream_halves-inl.h"

#include <cmath>
#include <type_traits>

#include "cpu/cpu.h"
#include "cpu/dispatch.h"
#include "cpu/rare_rows.h"
#include "cpu/row_driver.h"
#include "cpu/row_plan.h"
#include "cpu/row_tensor.h"
#include "cpu/statistics.h"

HWY_BEFORE_NAMESPACE();
namespace rmsnorm::cpu::HWY_NAMESPACE {

struct LayerNormForwardState {
  Moments moments;
  SplitMean mean;
  float rstd = 0.0f;
  bool rare = false;  // computed in double: see rare_rows.h
  double rare_mean = 0.0;
  double rare_rstd = 0.0;
};

// x, y: (rows, cols) in T; weight, bias: (cols) f32; mean, rstd: (rows) f32 or null.
template <class T, bool kWeight, bool kBias>
class LayerNormForwardKernel {
 public:
  using Element = T;  // of the row tensors
  using State = LayerNormForwardState;
  using Partial = Moments;

  LayerNormForwardKernel(const Problem& p, const RowPlan& plan, const ForwardArgs& a, const float* gain)
      : p_(p),
        plan_(plan),
        x_(static_cast<const T*>(a.x), p, registry::kX),
        gain_(gain),
        bias_(a.bias),
        y_(static_cast<T*>(a.y), p, registry::kY),
        mean_(a.mean),
        rstd_(a.rstd),
        y_in_place_(a.y == a.x),
        pairs_(p, static_cast<T*>(nullptr), gain, a.bias),
        range_(MakeEpilogueRange<kWeight, kBias>(gain, p.cols, std::sqrt(double(p.cols)))) {}

  int num_phases() const { return 1; }

  // The next rows' prefetches go out from the moments' second pass, which reads this row from L1, rather
  // than from the output pass, which streams y: measured faster (the commit says by how much, and where
  // not). Other kernels have no such pass (see HintsFor). Rows that StreamInHalves writes, those that
  // start on a line, are the exception: its pass issues them, measured faster on the Zen 4 (the commits
  // say by how much; rows off a line measured slower so).
  Partial Reduce(int, int64_t row, int64_t c0, int64_t c1, const State&) const {
    OutputHints<T> hints = HintsFor(plan_, y_in_place_, row, c0, x_);
    if (InHalves<true>(hints, y_.Row(row) + c0)) hints.prefetch_a = nullptr;
    return ChunkMoments(x_.Row(row) + c0, size_t(c1 - c0), hints);
  }

  void Fold(int, State& s, const Partial& part) const { FoldMoments(s.moments, part); }

  void Finish(int, int64_t row, State& s) const {
    double rstd = 0.0;
    double mean = s.moments.mean;
    if (MomentsInverseRoot(s.moments, p_.eps, &rstd)) {
      s.mean = Split(mean);
      s.rstd = static_cast<float>(rstd);
    } else {
      s.rare = true;
      LayerStatsDouble(x_.Row(row), p_, &s.rare_mean, &s.rare_rstd);
      mean = s.rare_mean;
      s.rstd = static_cast<float>(s.rare_rstd);
    }
    if (mean_) mean_[row] = static_cast<float>(mean);
    if (rstd_) rstd_[row] = s.rstd;
  }

  // A group of short rows (see RunRowGroups, row_groups-inl.h), one chunk each: ChunkMoments' first
  // pass for every row of the group, then its second, then Finish's and Output's operations. A row's
  // second pass waits on its first through a fold and a divide; taken row by row, as RunRowGroup takes
  // Reduce, each row's wait ended before the next row's sums could start. Returns false, having
  // written nothing, where a row is rare or the gain huge: the generic loop then runs the group.
  template <int64_t kRows>
  bool RunGroup(int64_t first, int64_t count) const {
    if (range_.huge_gain) return false;
    const size_t n = size_t(p_.cols);
    float estimates[kRows];
    for (int64_t r = 0; r < count; ++r) estimates[r] = ChunkMeanEstimate(x_.Row(first + r), n);
    // Plain arrays, and a State per row made where its output needs it: a group's array of States (or
    // of Moments), zeroed up front, put stores behind the last group's streamed outputs, and those
    // calls measured far slower. The inverse roots keep a loop of their own: taken in the second pass's
    // loop, row by row, they measured slower too (the commits say by how much).
    double means[kRows], m2s[kRows];
    for (int64_t r = 0; r < count; ++r) {
      const Moments m = ChunkMomentsAbout(x_.Row(first + r), n, estimates[r]);
      means[r] = m.mean;
      m2s[r] = m.m2;
    }
    float rstds[kRows];
    bool usual = true;
    for (int64_t r = 0; r < count; ++r) {
      Moments m;
      m.count = int64_t(n);
      m.mean = means[r];
      m.m2 = m2s[r];
      double rstd = 0.0;
      usual &= MomentsInverseRoot(m, p_.eps, &rstd);
      rstds[r] = static_cast<float>(rstd);
    }
    if (HWY_UNLIKELY(!usual)) return false;
    for (int64_t r = 0; r < count; ++r) {
      if (mean_) mean_[first + r] = static_cast<float>(means[r]);
      if (rstd_) rstd_[first + r] = rstds[r];
    }
    for (int64_t r = 0; r < count; ++r) {
      State s;
      s.mean = Split(means[r]);
      s.rstd = rstds[r];
      Output(first + r, 0, p_.cols, s, nullptr, nullptr);
    }
    return true;
  }

  void PrefetchRows(int64_t first, int64_t count) const {
    PrefetchInputRows(first, count, p_.cols, plan_.prefetch_into_l1, x_);
  }

  void Output(int64_t row, int64_t c0, int64_t c1, const State& s, float*, float*) const {
    const T* in = x_.Row(row) + c0;
    T* out = y_.Row(row) + c0;
    const float* w = gain_ + (kWeight ? c0 : 0);
    const float* b = bias_ + (kBias ? c0 : 0);
    if (s.rare)
      return RareForwardRow(in, out, c1 - c0, s.rare_mean, s.rare_rstd, kWeight ? w : nullptr, kBias ? b : nullptr);
    const DF d;
    const VF mean_hi = hn::Set(d, s.mean.hi), mean_lo = hn::Set(d, s.mean.lo);
    const VF rstd = hn::Set(d, s.rstd);
    const auto normalize = [&](VF x) RMSNORM_INLINE_LAMBDA { return hn::Mul(Centered(x, mean_hi, mean_lo), rstd); };
    // |x-hat| <= sqrt(cols): only a huge gain needs a look (see EpilogueRange).
    if (range_.huge_gain &&
        NearOverflow(MaxGainedMagnitude<kWeight>(d, in, kWeight ? w : nullptr, size_t(c1 - c0), normalize))) {
      double mean, rstd_double;
      LayerStatsDouble(x_.Row(row), p_, &mean, &rstd_double);
      return RareForwardRow(in, out, c1 - c0, mean, rstd_double, kWeight ? w : nullptr, kBias ? b : nullptr);
    }
    OutputHints<T> hints = HintsFor(plan_, y_in_place_, row, c0, x_);
    if constexpr (kStreamInHalves<T>) {
      if (InHalves<true>(hints, out)) {
        const float hi = s.mean.hi, lo = s.mean.lo, rstd_value = s.rstd;  // copies the stores cannot alias
        const auto normalize_either = [&](auto dd, auto x) RMSNORM_INLINE_LAMBDA {
          return hn::Mul(Centered(x, hn::Set(dd, hi), hn::Set(dd, lo)), hn::Set(dd, rstd_value));
        };
        return StreamInHalves<kWeight, kBias>(d, in, out, size_t(c1 - c0), w, b, hints, normalize_either);
      }
    }
    hints.prefetched = size_t(c1 - c0);  // by Reduce
    ForEachForwardOutput<kWeight, kBias>(d, in, out, size_t(c1 - c0), c0, w, b, pairs_, hints, normalize);
  }

 private:
  const Problem& p_;
  const RowPlan& plan_;
  RowTensor<const T> x_;
  const float* gain_;  // (cols), see ColumnParam (row_driver.h)
  const float* bias_;
  RowTensor<T> y_;
  float* mean_;
  float* rstd_;
  bool y_in_place_;
  PairedParams pairs_;  // bf16 only: see bf16_pairs-inl.h
  EpilogueRange range_;
};

static void LayerNormForwardImpl(const Problem& p, const ForwardArgs& a) {
  RunForward<LayerNormForwardKernel, KernelDtypeStorage>(p, a, 2);
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rmsnorm::cpu {
HWY_EXPORT(LayerNormForwardImpl);
void RMSNORM_PER_KERNEL_DTYPE(LayerNormForward)(const Problem& p, const ForwardArgs& args) {
  RMSNORM_DYNAMIC_DISPATCH(LayerNormForwardImpl)(p, args);
}
}  // namespace rmsnorm::cpu
#endif
