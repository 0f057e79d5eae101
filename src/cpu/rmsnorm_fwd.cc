// RMSNorm family forward (RMSNorm, pRMSNorm, L2-Norm), optionally fused with a residual add.
//
//   h = x (+ residual, rounded to T and stored to residual_out)
//   rstd = 1 / sqrt(sum_{i<k} h_i^2 / divisor + eps)
//   y = h * rstd * g (+ b)
//
// Per row: one pass reduces the chunk's squares in f32 lanes, a second (from cache) writes y.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/rmsnorm_fwd.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
// Then the per-target headers.
#include "hwy/highway.h"
#include "cpu/convert-inl.h"
#include "cpu/loops-inl.h"
#include "cpu/norm_math-inl.h"
#include "cpu/sums-inl.h"
#include "cpu/row_groups-inl.h"
#include "cpu/bf16_pairs-inl.h"
#include "cpu/quantize-inl.h"
#include "cpu/stream_halves-inl.h"

#include <algorithm>
#include <cmath>
#include <cstring>
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

struct RmsForwardState {
  double sum_squares = 0.0;
  float rstd = 0.0f;
  bool rare = false;  // computed in double: see rare_rows.h
  double rare_rstd = 0.0;
};

// x, residual, y, residual_out: (rows, cols) in T; weight, bias: (cols) f32; rstd: (rows) f32 or null.
template <class T, bool kWeight, bool kBias, bool kAdd>
class RmsForwardKernel {
 public:
  using Element = T;  // of the row tensors
  using State = RmsForwardState;
  using Partial = double;

  RmsForwardKernel(const Problem& p, const RowPlan& plan, const ForwardArgs& a, const float* gain)
      : p_(p),
        plan_(plan),
        x_(static_cast<const T*>(a.x), p, registry::kX),
        residual_(static_cast<const T*>(a.residual), p, registry::kResidual),
        gain_(gain),
        bias_(a.bias),
        y_(static_cast<T*>(a.y), p, registry::kY),
        h_(static_cast<T*>(a.residual_out), p, registry::kResidualOut),
        rstd_(a.rstd),
        y_in_place_(a.y == a.x || a.y == a.residual),
        pairs_(p, static_cast<T*>(nullptr), gain, a.bias),
        range_(MakeEpilogueRange<kWeight, kBias>(gain, p.cols, std::sqrt(double(p.divisor)))) {}

  int num_phases() const { return 1; }

  Partial Reduce(int, int64_t row, int64_t c0, int64_t c1, const State&) const {
    if constexpr (kAdd) {
      const DF d;
      const size_t n = size_t(c1 - c0);
      const T* x = x_.Row(row) + c0;
      const T* residual = residual_.Row(row) + c0;
      T* h = h_.Row(row) + c0;
      size_t done = 0;
      if constexpr (kHaveBf16Pairs && std::is_same_v<T, hwy::bfloat16_t>) done = AddBf16Pairs(d, x, residual, h, n);
      ForEachVector(d, n - done, [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA {
        Store(d, hn::Add(Load(d, x + done + i, count), Load(d, residual + done + i, count)), h + done + i, count);
      });
    }
    // The statistic is taken from what was stored, so fused equals add-then-norm bit for bit.
    const int64_t end = std::min(c1, p_.k);
    return c0 < end ? double(SumSquares(Input(row) + c0, size_t(end - c0), size_t(c1 - c0))) : 0.0;
  }

  void Fold(int, State& s, Partial sum_squares) const { s.sum_squares += sum_squares; }

  void Finish(int, int64_t row, State& s) const {
    double rstd;
    if (RmsInverseRoot(p_, s.sum_squares, &rstd)) {
      s.rstd = static_cast<float>(rstd);
    } else {
      s.rare = true;
      s.rare_rstd = RmsInverseRootDouble(Input(row), p_);
      s.rstd = static_cast<float>(s.rare_rstd);
    }
    if (rstd_) rstd_[row] = s.rstd;
  }

  // The one-row path's Output (see RunRowGroup): out of place, pRMSNorm's look at its columns past k
  // (see NeedsDouble) is taken while y is written, and a chunk that comes near f32's overflow, which is
  // rare, is then written again in double. One pass over x where the look alone was another, on every
  // row whose rstd > 1. The look covers every column: those below k stay far below the overflow unless
  // the gain is huge, where the look comes first, as it does in place, where x is gone once y is
  // written. Short rows keep Output: their look is a few vectors from L1, and a second output loop in
  // their grouped loop slowed every short row.
  void OutputRow(int64_t row, int64_t c0, int64_t c1, const State& s, float* dw, float* db) const {
    if (s.rare || !PastKNeedsLook(c0, c1, s.rstd) || range_.huge_gain || y_in_place_)
      return Output(row, c0, c1, s, dw, db);
    const T* in = Input(row) + c0;
    T* out = y_.Row(row) + c0;
    const float* w = gain_ + (kWeight ? c0 : 0);
    const float* b = bias_ + (kBias ? c0 : 0);
    const auto hints = OutputHintsFor(row, c0);
    const DF d;
    const VF rstd = hn::Set(d, s.rstd);
    auto max_bits = hn::Zero(DI32());
    ForEachForwardOutput<kWeight, kBias>(d, in, out, size_t(c1 - c0), c0, w, b, pairs_, hints,
                                         [&](VF x) RMSNORM_INLINE_LAMBDA {
                                           const VF v = hn::Mul(x, rstd);
                                           max_bits = AddMagnitudes(max_bits, v, hn::Lanes(d));
                                           return v;
                                         });
    if (!NearOverflow(FloatFromBits(MaxOfMagnitudes(max_bits)), range_.gain_factor)) return;
    if (hints.stream) hwy::FlushStream();  // the ordinary stores below land after the streamed ones
    RareForwardRow(in, out, c1 - c0, 0.0, RmsInverseRootDouble(Input(row), p_), kWeight ? w : nullptr,
                   kBias ? b : nullptr);
  }

  // A group of short rows (see RunRowGroups, row_groups-inl.h) of plain RMSNorm or L2-Norm: Reduce,
  // Fold, Finish and Output's operations, in three loops over the group's rows with the statistics in
  // local arrays rather than in States, and the output hints taken once. Their outputs never look past
  // k nor at a huge gain, so the per-row work is what is left. Returns false, having written nothing,
  // where the group has a rare row or the call needs more (the fused add, pRMSNorm, a huge gain): the
  // generic loop then runs the group.
  // Three things keep a short row's fixed work small (the commit says by how much): rows of whole sum
  // blocks (head dims of 64, 128, 256) skip the padded last block's set-up; the group's inverse roots
  // are one chain of vector divides and roots (RmsInverseRoots); and where the hints ask for nothing
  // (rows in cache, written forward) the output loop is given hints known at compile time, so it
  // carries no per-vector tests. (ForEachForwardOutput's own copy for rows in cache leaves the
  // direction to run time: short f32 rows measured slower through it alone, the commit says how much.)
  template <int64_t kRows>
  bool RunGroup(int64_t first, int64_t count) const {
    if (!plain_groups_) return false;
    const size_t cols = size_t(p_.cols);
    HWY_ALIGN float sums[kRows];
    if (cols % kSumBlock == 0) {
      for (int64_t r = 0; r < count; ++r) sums[r] = SumSquaresOfBlocks(x_.Row(first + r), cols);
    } else {
      for (int64_t r = 0; r < count; ++r) sums[r] = SumSquares(x_.Row(first + r), cols, cols);
    }
    HWY_ALIGN float rstds[kRows];
    if (HWY_UNLIKELY(!RmsInverseRoots<kRows>(p_, sums, size_t(count), rstds))) return false;
    if (rstd_) {
      if (count == kRows) {
        std::memcpy(rstd_ + first, rstds, sizeof rstds);  // a fixed size inlines; a copy of count called memmove
      } else {
        std::copy(rstds, rstds + count, rstd_ + first);
      }
    }
    const OutputHints<T> hints = OutputHintsFor(first, 0);  // no next row: see RunRowGroupsPrefetching
    const DF d;
    const auto outputs = [&](const OutputHints<T>& h) RMSNORM_INLINE_LAMBDA {
      for (int64_t r = 0; r < count; ++r) {
        const VF rstd = hn::Set(d, rstds[r]);
        ForEachForwardOutput<kWeight, kBias>(d, x_.Row(first + r), y_.Row(first + r), cols, 0, gain_, bias_, pairs_,
                                             h, [&](VF x) RMSNORM_INLINE_LAMBDA { return hn::Mul(x, rstd); });
      }
    };
    if (!hints.stream && !hints.reversed && hints.prefetch_a == nullptr) {
      outputs(OutputHints<T>{});
    } else {
      outputs(hints);
    }
    return true;
  }

  void PrefetchRows(int64_t first, int64_t count) const {
    PrefetchInputRows(first, count, p_.cols, plan_.prefetch_into_l1, x_, kAdd ? &residual_ : nullptr);
  }

  void Output(int64_t row, int64_t c0, int64_t c1, const State& s, float*, float*) const {
    const T* in = Input(row) + c0;
    T* out = y_.Row(row) + c0;
    const float* w = gain_ + (kWeight ? c0 : 0);
    const float* b = bias_ + (kBias ? c0 : 0);
    if (s.rare) return RareForwardRow(in, out, c1 - c0, 0.0, s.rare_rstd, kWeight ? w : nullptr, kBias ? b : nullptr);
    if (NeedsDouble(in, w, c0, c1, s.rstd))
      return RareForwardRow(in, out, c1 - c0, 0.0, RmsInverseRootDouble(Input(row), p_), kWeight ? w : nullptr,
                            kBias ? b : nullptr);
    const DF d;
    const VF rstd = hn::Set(d, s.rstd);
    const OutputHints<T> hints = OutputHintsFor(row, c0);
    // The fused add's h and the split path's chunks come through here too; pRMSNorm's columns past k
    // (OutputRow) and grouped short rows do not.
    if constexpr (kStreamInHalves<T>) {
      if (InHalves(hints, out)) {
        const float rstd_value = s.rstd;  // a copy the stores cannot alias
        return StreamInHalves<kWeight, kBias>(d, in, out, size_t(c1 - c0), w, b, hints,
                                              [&](auto dd, auto x) RMSNORM_INLINE_LAMBDA {
                                                return hn::Mul(x, hn::Set(dd, rstd_value));
                                              });
      }
    }
    ForEachForwardOutput<kWeight, kBias>(d, in, out, size_t(c1 - c0), c0, w, b, pairs_, hints,
                                         [&](VF x) RMSNORM_INLINE_LAMBDA { return hn::Mul(x, rstd); });
  }

 private:
  const T* Input(int64_t row) const { return kAdd ? h_.Row(row) : x_.Row(row); }

  // The fused add prefetches one row down whatever its width: further measured slower for it (the
  // commit says by how much).
  // pRMSNorm's reduction reads the first k columns only, so its output pass is the first to read the
  // rest, and nothing is gained by meeting the reduction's last lines first (see HintsFor): f32 rows
  // from L2 measured faster forward, 16-bit rows slower (the commit says by how much).
  OutputHints<T> OutputHintsFor(int64_t row, int64_t c0) const {
    OutputHints<T> hints =
        HintsFor(plan_, y_in_place_, row, c0, x_, kAdd ? &residual_ : nullptr, kAdd ? 1 : INT64_MAX);
    if (!kAdd && std::is_same_v<T, float> && p_.k < p_.cols) hints.reversed = false;
    return hints;
  }

  // Also the quantized kernel's (below).
 protected:
  // Whether the chunk takes the double path for its epilogue's range (see EpilogueRange). Where the
  // gain is huge it looks at every column's x * rstd * g. Otherwise only pRMSNorm's columns past k can
  // get there, unless |x * rstd * g| <= |x| (rstd <= 1 and a gain factor of 1): it takes their largest
  // |x * rstd| times the gain factor, a bound that is enough for rows this rare, and reads only the
  // past-k part of the chunk, which the output pass then finds in cache. RMSNorm and L2-Norm never
  // look for ordinary gains. Fixed chunks: the choice does not depend on the thread count.
  // w: the chunk's gain.
  bool NeedsDouble(const T* in, const float* w, int64_t c0, int64_t c1, float rstd) const {
    const DF d;
    const VF r = hn::Set(d, rstd);
    const auto normalize = [&](VF x) RMSNORM_INLINE_LAMBDA { return hn::Mul(x, r); };
    if (range_.huge_gain) return NearOverflow(MaxGainedMagnitude<kWeight>(d, in, w, size_t(c1 - c0), normalize));
    const int64_t from = std::max(c0, p_.k);
    if (from >= c1 || (rstd <= 1.0f && range_.gain_factor <= 1.0f)) return false;
    return NearOverflow(MaxGainedMagnitude<false>(d, in + (from - c0), nullptr, size_t(c1 - from), normalize),
                        range_.gain_factor);
  }

  // Whether NeedsDouble looks at pRMSNorm's columns past k (where the gain is not huge).
  bool PastKNeedsLook(int64_t c0, int64_t c1, float rstd) const {
    return std::max(c0, p_.k) < c1 && !(rstd <= 1.0f && range_.gain_factor <= 1.0f);
  }

 private:
  const Problem& p_;
  const RowPlan& plan_;
  RowTensor<const T> x_;
  RowTensor<const T> residual_;
  const float* gain_;  // (cols), see ColumnParam (row_driver.h)
  const float* bias_;
  RowTensor<T> y_;
  RowTensor<T> h_;
  float* rstd_;
  bool y_in_place_;
  PairedParams pairs_;  // bf16 only: see bf16_pairs-inl.h
  EpilogueRange range_;
  bool plain_groups_ = !kAdd && p_.k == p_.cols && !range_.huge_gain;  // see RunGroup
};

template <class T, bool kWeight, bool kBias>
using RmsForwardPlain = RmsForwardKernel<T, kWeight, kBias, false>;
template <class T, bool kWeight, bool kBias>
using RmsForwardFusedAdd = RmsForwardKernel<T, kWeight, kBias, true>;

static void RmsForwardImpl(const Problem& p, const ForwardArgs& a) {
  if (a.residual != nullptr) return RunForward<RmsForwardFusedAdd, KernelDtypeStorage>(p, a, 4);
  RunForward<RmsForwardPlain, KernelDtypeStorage>(p, a, 2);
}

// ---- Quantized outputs -----------------------------------------------------------------------------
//
// The forward above with y kept in f32: each row's y goes to a row buffer (one per row block, so the
// threads never share one), and once the row's last chunk is there, it is quantized whole (its scale
// needs every element). The statistics and y are the plain kernel's, operation for operation, so the
// quantized bytes are those of QuantizeXRow applied to what rmsnorm_forward writes in f32.

template <class T, bool kWeight, bool kBias, bool kAdd>
class RmsForwardQuantizedKernel : public RmsForwardKernel<T, kWeight, kBias, kAdd> {
  using Base = RmsForwardKernel<T, kWeight, kBias, kAdd>;

 public:
  using typename Base::State;

  RmsForwardQuantizedKernel(const Problem& p, const RowPlan& plan, const ForwardArgs& a, const float* gain,
                            const QuantizedOutput& out, float* row_buffers)
      : Base(p, plan, a, gain),
        p_(p),
        plan_(plan),
        input_(static_cast<const T*>(kAdd ? a.residual_out : a.x), p, kAdd ? registry::kResidualOut : registry::kX),
        x_(static_cast<const T*>(a.x), p, registry::kX),
        residual_(static_cast<const T*>(a.residual), p, registry::kResidual),
        gain_(gain),
        bias_(a.bias),
        format_(out.format->code),
        unit_bytes_(out.format->unit_bytes),
        q_(static_cast<uint8_t*>(out.q)),
        scales_(out.scales),
        static_scale_(out.format->scales == registry::QuantScales::kStatic ? *out.scales : 0.0f),
        row_buffers_(row_buffers),
        row_max_bits_(reinterpret_cast<uint32_t*>(row_buffers + plan.num_blocks * p.cols)) {}

  void Output(int64_t row, int64_t c0, int64_t c1, const State& s, float*, float*) const {
    const int64_t block = row / plan_.block_rows;
    float* y = row_buffers_ + block * p_.cols;
    const T* in = input_.Row(row) + c0;
    const float* w = gain_ + (kWeight ? c0 : 0);
    const float* b = bias_ + (kBias ? c0 : 0);
    auto max = hn::Zero(DI32());  // |y|'s bits over the chunk, for the row's scale (AddMagnitudes)
    if (s.rare || this->NeedsDouble(in, w, c0, c1, s.rstd)) {
      const double rstd = s.rare ? s.rare_rstd : RmsInverseRootDouble(input_.Row(row), p_);
      RareForwardRow(in, y + c0, c1 - c0, 0.0, rstd, kWeight ? w : nullptr, kBias ? b : nullptr);
      ForEachVector(DF(), size_t(c1 - c0), [&](size_t i, size_t count) {
        max = AddMagnitudes(max, Load(DF(), y + c0 + i, count), count);
      });
    } else {
      const DF d;
      const VF rstd = hn::Set(d, s.rstd);
      ForEachVector(d, size_t(c1 - c0), [&](size_t i, size_t count) RMSNORM_INLINE_LAMBDA {
        const VF y_i = ScaleShift<kWeight, kBias>(d, hn::Mul(Load(d, in + i, count), rstd), w, b, i, count);
        max = AddMagnitudes(max, y_i, count);
        Store(d, y_i, y + c0 + i, count);
      });
    }
    uint32_t& max_bits = row_max_bits_[block];
    max_bits = c0 == 0 ? MaxOfMagnitudes(max) : std::max(max_bits, MaxOfMagnitudes(max));
    if (c1 == p_.cols) Quantize(row, y, max_bits);
  }

 private:
  void Quantize(int64_t row, const float* y, uint32_t max_bits) const {
    uint8_t* q = q_ + p_.RowStart(registry::kQ, row) * int64_t(unit_bytes_);
    // q goes out with non-temporal stores where the plain forward's y would (the row driver flushes).
    const bool stream = plan_.stream_outputs && reinterpret_cast<uintptr_t>(q) % 16 == 0;
    // The next row's inputs stream in while this one is quantized, the row's last pass, which reads
    // cache only. Issued from the pass that makes y instead (as the plain kernel does from its output
    // pass), they left memory idle while the row was quantized: the calls from memory took 1.1-1.3x
    // as long on the Zen 4 (the commit says by how much), though an earlier build on another machine
    // had measured that place faster.
    const auto prefetch = [hints = HintsFor(plan_, true, row, 0, x_, kAdd ? &residual_ : nullptr)](
                              size_t i, size_t count) RMSNORM_INLINE_LAMBDA { PrefetchNextRowSpan(hints, i, count); };
    switch (format_) {
      case RMSNORM_QUANT_INT8_ROW:
        return QuantizeInt8Row(y, p_.cols, max_bits, reinterpret_cast<int8_t*>(q), scales_ + row, stream, prefetch);
      case RMSNORM_QUANT_FP8_E4M3_ROW:
        return QuantizeFp8E4M3Row(y, p_.cols, max_bits, q, scales_ + row, stream, prefetch);
      case RMSNORM_QUANT_FP8_E4M3_STATIC: {
        float scale = static_scale_;
        return QuantizeFp8E4M3Row(y, p_.cols, q, &scale, false, stream, prefetch);
      }
      case RMSNORM_QUANT_Q8_0:
        return QuantizeQ8_0Row(y, p_.cols, q, prefetch);
    }
  }

  const Problem& p_;
  const RowPlan& plan_;
  RowTensor<const T> input_;  // what the statistic and y are taken from: x, or the stored x + residual
  RowTensor<const T> x_, residual_;  // the next row's, to prefetch
  const float* gain_;
  const float* bias_;
  rmsnorm_quant_format format_;
  size_t unit_bytes_;
  uint8_t* q_;
  float* scales_;
  float static_scale_;
  float* row_buffers_;  // (blocks, cols) f32
  uint32_t* row_max_bits_;  // (blocks): max|y| over the chunks of the block's current row written so far
};

static void RmsForwardQuantizedImpl(const Problem& p, const ForwardArgs& a, const QuantizedOutput& out) {
  static_assert(sizeof(quant::BlockQ8_0) == registry::FindQuantFormat(RMSNORM_QUANT_Q8_0)->unit_bytes,
                "registry/quant_formats.inc: q8_0's block size");
  const bool add = a.residual != nullptr;
  const int64_t tensors = add ? 4 : 2;
  RowPlan plan = MakePlan(p, tensors);
  plan.split = false;  // a row is quantized whole, by the thread that wrote its y
  runtime::ScratchLease lease;
  // Each block's row of y, and after them each block's max|y| bits.
  float* row_buffers = lease.Borrow(runtime::ScratchSlot::kQuantizedRows, size_t(plan.num_blocks * (p.cols + 1)));
  static_assert(sizeof(float) == sizeof(uint32_t));
  const int64_t bytes = tensors * p.rows * p.cols * int64_t(DtypeSize(p.dtype));
  const ForwardParams params(p, a, plan, bytes);
  // Not RMSNORM_INLINE_LAMBDA: GCC gives a lambda in a target function no target attributes, so it
  // cannot force one inline here (RunForward, a template outside the target namespace, can).
  WithFlag(a.weight != nullptr, [&](auto weight) {
    WithFlag(a.bias != nullptr, [&](auto bias) {
      WithFlag(add, [&](auto fused) {
        const RmsForwardQuantizedKernel<KernelDtypeStorage, decltype(weight)::value, decltype(bias)::value,
                                        decltype(fused)::value>
            kernel(p, plan, params.args(), params.gain(), out, row_buffers);
        RunRows(plan, bytes, kernel, nullptr);
      });
    });
  });
}

}  // namespace rmsnorm::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace rmsnorm::cpu {
HWY_EXPORT(RmsForwardImpl);
void RMSNORM_PER_KERNEL_DTYPE(RmsForward)(const Problem& p, const ForwardArgs& args) {
  RMSNORM_DYNAMIC_DISPATCH(RmsForwardImpl)(p, args);
}
HWY_EXPORT(RmsForwardQuantizedImpl);
void RMSNORM_PER_KERNEL_DTYPE(RmsForwardQuantized)(const Problem& p, const ForwardArgs& args,
                                                   const QuantizedOutput& out) {
  RMSNORM_DYNAMIC_DISPATCH(RmsForwardQuantizedImpl)(p, args, out);
}
}  // namespace rmsnorm::cpu
#endif
