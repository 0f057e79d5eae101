// A libFuzzer target on the C ABI (make fuzz: tests/fuzz/regressions once each, then FUZZ_SECONDS from
// tests/fuzz/corpus). An input chooses an operation, a config whose fields may be any bits, each
// tensor's place (its own buffer, NULL, misaligned, the start of another tensor, or inside one) and
// the data's bits. It checks what the header promises:
//   - a call is refused exactly when the contract says (config, NULL, alignment, overlap), and a
//     refused call writes nothing and leaves a message naming its function;
//   - no byte but an output's is written: every other byte of the arena, guard zones around each
//     buffer included, keeps its value;
//   - an accepted call matches the reference backend, run on separate buffers: forward outputs per
//     element within tolerances from the size of their terms, backward ones from the row's scale
//     (tests/test_util.h), NaN exactly where the reference has NaN.
// A backward's saved statistics (mean, rstd), when given in their own buffers, are what the header
// says they are: the forward's outputs for the same x, eps and partial (the reference's), sometimes
// with rstd scaled by a factor in [1/2, 2], which the header also covers. Where they are not (they
// overlap another tensor's bytes, so they hold that tensor's data), the call is outside the contract:
// it must still be accepted or refused as the contract says and write only its outputs, but its values
// are not compared.
// AddressSanitizer and UndefinedBehaviorSanitizer, which the library is built with for this program,
// report the rest. A finding aborts, so that libFuzzer keeps the input.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"
#include "runtime/problem.h"
#include "test_util.h"

namespace rmsnorm::test {
namespace {

constexpr size_t kGuardBytes = 64;
constexpr uint8_t kGuardByte = 0xA5;


float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Mostly a value the contract accepts (a few typical ones), sometimes any bits.
float PickFloat(FuzzedDataProvider& in, std::initializer_list<float> typical) {
  const uint8_t choice = in.ConsumeIntegral<uint8_t>();
  if (choice < 224) return typical.begin()[choice % typical.size()];
  return FloatFromBits(in.ConsumeIntegral<uint32_t>());
}

// Where a tensor's pointer goes.
enum class Place { kOwn, kNull, kMisaligned, kStartOf, kInside };

struct Tensor {
  registry::TensorUse use;
  Place place = Place::kOwn;
  size_t other = 0;        // kStartOf, kInside: an earlier tensor of the call
  size_t offset = 0;       // into the arena (kOwn, kMisaligned: its own region)
  size_t bytes = 0;        // what the call may read or write through it
  size_t element = 0;      // its element size
  bool null = false;
};

struct Call {
  size_t target = 0;  // of AvailableTargets(): every target the build has runs its own kernels
  const registry::OpInfo* op = nullptr;
  rmsnorm_config config{};
  std::vector<Tensor> tensors;
  std::vector<uint8_t> arena;  // the buffers with guard zones, and slack for pointers inside one
  bool saved_stats_in_contract = true;  // a backward's saved mean and rstd are the forward's (see above)
};

int32_t RawDtype(const rmsnorm_config& c) {
  int32_t raw;
  static_assert(sizeof raw == sizeof c.dtype);
  std::memcpy(&raw, &c.dtype, sizeof raw);
  return raw;
}

bool ConfigValid(const Call& call);
const Tensor* Find(const Call& call, registry::Tensor which);
RowTensor RowsAt(const Call& call, const std::vector<uint8_t>& arena, const Tensor* t);
Op NormOf(const registry::OpInfo& op);

// The test case of a call's config (its tensors are the caller's to add).
Case CaseOf(const Call& call) {
  Case c;
  c.op = NormOf(*call.op);
  c.dtype = call.config.dtype;
  c.rows = call.config.rows;
  c.cols = call.config.cols;
  c.partial = call.config.partial;
  c.eps = call.config.eps;
  c.weight_offset = call.config.weight_offset;
  return c;
}

// A backward's saved statistics, as the contract has them: the forward's mean and rstd for the call's
// x, eps and partial (the reference's forward), written into their buffers once the data is in place.
// `scale` < 160 keeps rstd as it is; above, rstd is multiplied by a factor from 1/2 to 2. Statistics
// placed inside another tensor, or that x reaches into, stay as they are, and the call is then outside
// the contract.
void SaveForwardStatistics(Call& call, uint8_t scale) {
  if (call.op->direction != registry::Direction::kBackward) return;
  Tensor* rstd = nullptr;
  Tensor* mean = nullptr;
  for (Tensor& t : call.tensors) {
    if (t.null || registry::IsOutput(t.use.role)) continue;
    if (t.use.tensor == registry::kRstd) rstd = &t;
    if (t.use.tensor == registry::kMean) mean = &t;
  }
  if (rstd == nullptr && mean == nullptr) return;
  for (const Tensor* t : {rstd, mean}) {
    if (t && t->place != Place::kOwn && t->place != Place::kMisaligned) call.saved_stats_in_contract = false;
  }
  if (!call.saved_stats_in_contract || !ConfigValid(call) || call.config.rows == 0) return;
  const Tensor* x = Find(call, registry::kX);
  if (x == nullptr) return;  // refused
  // Statistics written into x's bytes (x may reach past the buffer it starts inside) would change the
  // x they were taken from.
  for (const Tensor* t : {rstd, mean}) {
    if (t && t->offset < x->offset + x->bytes && x->offset < t->offset + t->bytes) {
      call.saved_stats_in_contract = false;
      return;
    }
  }
  Case c = CaseOf(call);
  c.weight = c.bias = false;
  Inputs in;
  in.x = RowsAt(call, call.arena, x);
  const Outputs forward = RunForward(c, in, RMSNORM_BACKEND_REFERENCE);
  const float factor = scale < 160 ? 1.0f : std::exp2(float(scale - 160) / 47.5f - 1.0f);  // [1/2, 2]
  for (int64_t row = 0; row < c.rows; ++row) {
    if (rstd) {
      const float v = forward.rstd[size_t(row)] * factor;
      std::memcpy(call.arena.data() + rstd->offset + 4 * size_t(row), &v, 4);
    }
    if (mean && !forward.mean.empty())
      std::memcpy(call.arena.data() + mean->offset + 4 * size_t(row), &forward.mean[size_t(row)], 4);
  }
}

Call Decode(FuzzedDataProvider& in) {
  Call call;
  // One byte whatever the build's target count, so that an input decodes alike in every build.
  call.target = in.ConsumeIntegral<uint8_t>() % AvailableTargets().size();
  call.op = &registry::kOps[in.ConsumeIntegralInRange<size_t>(0, std::size(registry::kOps) - 1)];
  const bool rms_family = call.op->kind == registry::NormKind::kRms;
  int64_t rows = in.ConsumeIntegralInRange<int64_t>(0, 9);
  int64_t cols = 0;
  switch (in.ConsumeIntegralInRange<int>(0, 15)) {
    case 0: cols = in.ConsumeIntegralInRange<int64_t>(16380, 16400); break;  // two reduction chunks
    case 1: cols = in.ConsumeIntegralInRange<int64_t>(257, 4100); break;
    case 2: cols = in.ConsumeIntegralInRange<int64_t>(-2, 0); break;          // refused
    default: cols = in.ConsumeIntegralInRange<int64_t>(1, 256); break;
  }
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) rows = -in.ConsumeIntegralInRange<int64_t>(1, 3);
  call.config = rmsnorm_config_init(rows, cols);
  const uint8_t dtype = in.ConsumeIntegral<uint8_t>();
  const int32_t raw_dtype = dtype < 240 ? int32_t(registry::kDtypes[dtype % std::size(registry::kDtypes)].code)
                                        : in.ConsumeIntegral<int32_t>();
  std::memcpy(&call.config.dtype, &raw_dtype, sizeof raw_dtype);  // any value, without C++'s enum rules
  call.config.eps = PickFloat(in, {1e-6f, 1e-5f, 0.0f});
  call.config.partial = rms_family ? PickFloat(in, {1.0f, 0.5f, 0.25f, 0.0625f, 0.1f}) : PickFloat(in, {1.0f});
  call.config.weight_offset = PickFloat(in, {0.0f, 0.0f, 1.0f, -0.5f});

  const registry::DtypeInfo* info = registry::FindDtype(raw_dtype);
  const size_t row_element = info ? info->size : 4;
  const int64_t elements_rows = std::max<int64_t>(rows, 0), elements_cols = std::max<int64_t>(cols, 0);
  size_t end = kGuardBytes;
  for (size_t i = 0; i < call.op->num_tensors; ++i) {
    Tensor t;
    t.use = call.op->tensors[i];
    const registry::Shape shape = registry::Info(t.use.tensor).shape;
    t.element = shape == registry::Shape::kRowsCols ? row_element : sizeof(float);
    t.bytes = size_t(registry::Elements(shape, elements_rows, elements_cols)) * t.element;
    const uint8_t place = in.ConsumeIntegral<uint8_t>();
    if (place < 170 || i == 0) {
      t.place = Place::kOwn;
    } else if (place < 195) {
      t.place = Place::kNull;
    } else if (place < 205) {
      t.place = t.element > 1 ? Place::kMisaligned : Place::kOwn;
    } else if (place < 240) {
      t.place = Place::kStartOf;
      t.other = place % i;
    } else {
      t.place = Place::kInside;
      t.other = place % i;
      t.offset = t.element * in.ConsumeIntegralInRange<size_t>(1, 300);  // bytes into the other
    }
    if (t.place == Place::kOwn || t.place == Place::kMisaligned) {
      t.offset = end + (t.place == Place::kMisaligned ? 1 : 0);
      end = (t.offset + t.bytes + kGuardBytes + 63) / 64 * 64;
    }
    call.tensors.push_back(t);
  }
  for (Tensor& t : call.tensors) {
    if (t.place == Place::kNull) t.null = true;
    if (t.place == Place::kStartOf || t.place == Place::kInside) {
      const Tensor& other = call.tensors[t.other];
      t.null = other.null;
      t.offset += other.offset;
    }
    end = std::max(end, t.offset + t.bytes + kGuardBytes);  // a tensor inside another may reach past it
  }
  call.arena.assign(end, kGuardByte);

  // The data: each own buffer either any bits or small integers times a power of two.
  for (const Tensor& t : call.tensors) {
    if (t.place != Place::kOwn && t.place != Place::kMisaligned) continue;
    uint8_t* data = call.arena.data() + t.offset;
    if (in.ConsumeBool()) {
      const std::vector<uint8_t> bits = in.ConsumeBytes<uint8_t>(t.bytes);
      for (size_t b = 0; b < t.bytes; ++b) data[b] = bits.empty() ? 0 : bits[b % bits.size()];
    } else {
      const int exponent = in.ConsumeIntegralInRange<int>(-140, 130);
      const std::vector<uint8_t> values = in.ConsumeBytes<uint8_t>(t.bytes / t.element);
      for (size_t e = 0; e < t.bytes / t.element; ++e) {
        const float v = std::ldexp(float(int8_t(values.empty() ? 0 : values[e % values.size()])), exponent);
        if (t.element == 4) {
          std::memcpy(data + 4 * e, &v, 4);
        } else {
          RowTensor one(info ? info->code : RMSNORM_F32, 1, 1);
          one.set(0, v);
          std::memcpy(data + t.element * e, one.data(), t.element);
        }
      }
    }
  }
  SaveForwardStatistics(call, in.ConsumeIntegral<uint8_t>());
  return call;
}

// The call, for the report of a finding.
std::string Describe(const Call& call) {
  const rmsnorm_config& c = call.config;
  char text[256];
  std::snprintf(text, sizeof text, "%s dtype %d, %lld x %lld, eps %.9g, partial %.9g, offset %.9g, target %s",
                call.op->c_function, int(RawDtype(c)), (long long)c.rows, (long long)c.cols, double(c.eps),
                double(c.partial), double(c.weight_offset), TargetName(AvailableTargets()[call.target]).c_str());
  std::string out = text;
  for (const Tensor& t : call.tensors)
    out += std::string("; ") + registry::Info(t.use.tensor).name + (t.null ? " NULL" : " @" + std::to_string(t.offset));
  return out;
}

// The inputs' values, for a small call's report.
std::string InputValues(const Call& call) {
  std::string out;
  if (call.config.rows < 0 || call.config.rows * call.config.cols > 64) return out;
  for (const Tensor& t : call.tensors) {
    if (t.null || registry::IsOutput(t.use.role)) continue;
    const bool rows_cols = registry::Info(t.use.tensor).shape == registry::Shape::kRowsCols;
    out += std::string("\n  ") + registry::Info(t.use.tensor).name + ":";
    for (size_t e = 0; e < t.bytes / t.element; ++e) {
      double v;
      if (rows_cols && t.element != 4) {
        RowTensor one(call.config.dtype, 1, 1);
        std::memcpy(one.data(), call.arena.data() + t.offset + t.element * e, t.element);
        v = one.get(0);
      } else {
        float f;
        std::memcpy(&f, call.arena.data() + t.offset + 4 * e, 4);
        v = f;
      }
      char text[32];
      std::snprintf(text, sizeof text, " %.9g", v);
      out += text;
    }
  }
  return out;
}

[[noreturn]] void Finding(const Call& call, const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n  in %s%s\n", what.c_str(), Describe(call).c_str(), InputValues(call).c_str());
  std::abort();
}

// ---- What the contract says about a call ---------------------------------------------------------

bool ConfigValid(const Call& call) {
  const rmsnorm_config& c = call.config;
  if (c.rows < 0 || c.cols < 1 || registry::FindDtype(RawDtype(c)) == nullptr) return false;
  if (!std::isfinite(c.eps) || c.eps < 0.0f || !(c.partial > 0.0f && c.partial <= 1.0f)) return false;
  if (call.op->kind != registry::NormKind::kRms && c.partial != 1.0f) return false;
  return std::isfinite(c.weight_offset);
}

bool TensorsValid(const Call& call) {
  bool mean_given = false, rstd_given = false, reads_mean = false;
  for (const Tensor& t : call.tensors) {
    if (t.null && registry::IsRequired(t.use.role)) return false;
    if (!t.null && t.offset % t.element != 0) return false;
    if (t.use.tensor == registry::kMean && !registry::IsOutput(t.use.role)) reads_mean = true, mean_given = !t.null;
    if (t.use.tensor == registry::kRstd) rstd_given = !t.null;
  }
  if (reads_mean && mean_given != rstd_given) return false;
  // An output may share bytes with another buffer only as in-place use: both row tensors, the same
  // start, one an input and the other an output.
  for (size_t i = 0; i < call.tensors.size(); ++i) {
    for (size_t j = i + 1; j < call.tensors.size(); ++j) {
      const Tensor &a = call.tensors[i], &b = call.tensors[j];
      if (a.null || b.null || a.bytes == 0 || b.bytes == 0) continue;
      const bool a_out = registry::IsOutput(a.use.role), b_out = registry::IsOutput(b.use.role);
      if (!(a_out || b_out) || a.offset >= b.offset + b.bytes || b.offset >= a.offset + a.bytes) continue;
      const bool rows_cols = registry::Info(a.use.tensor).shape == registry::Shape::kRowsCols &&
                             registry::Info(b.use.tensor).shape == registry::Shape::kRowsCols;
      if (!(rows_cols && a.offset == b.offset && a_out != b_out)) return false;
    }
  }
  return true;
}

// ---- The reference on separate buffers -----------------------------------------------------------

const Tensor* Find(const Call& call, registry::Tensor which) {
  for (const Tensor& t : call.tensors)
    if (t.use.tensor == which && !t.null) return &t;
  return nullptr;
}

RowTensor RowsAt(const Call& call, const std::vector<uint8_t>& arena, const Tensor* t) {
  RowTensor rows(call.config.dtype, call.config.rows, call.config.cols);
  if (t) std::memcpy(rows.data(), arena.data() + t->offset, rows.bytes());
  return rows;
}

std::vector<float> FloatsAt(const std::vector<uint8_t>& arena, const Tensor* t) {
  std::vector<float> v(t ? t->bytes / sizeof(float) : 0);
  if (t) std::memcpy(v.data(), arena.data() + t->offset, t->bytes);
  return v;
}

Op NormOf(const registry::OpInfo& op) {
  switch (op.op) {
    case registry::Op::kRmsAddForward: return Op::kAddRmsNorm;
    case registry::Op::kLayerForward:
    case registry::Op::kLayerBackward: return Op::kLayerNorm;
    case registry::Op::kL2Forward:
    case registry::Op::kL2Backward: return Op::kL2Norm;
    default: return Op::kRmsNorm;
  }
}

// A tolerance built from infinite or NaN terms is NaN: it admits any finite difference, while NaN must
// still meet NaN and an infinity the same infinity.
void Expect(const Call& call, const char* what, const std::vector<double>& got, const std::vector<double>& want,
            std::vector<double> tolerance) {
  for (double& t : tolerance)
    if (std::isnan(t)) t = std::numeric_limits<double>::infinity();
  const std::string failure = Compare(what, got, want, tolerance);
  if (!failure.empty()) Finding(call, failure);
}

// Row outputs (y, dx) are a value rounded to the dtype, where a value beyond its largest finite one
// (65504 for f16, 3.4e38 for f32) is +-inf. An infinity stands for all the values that round to it:
// an infinite output is accepted where some value within the tolerance of the reference's rounds to
// it, and a finite output against an infinite reference where it is within the tolerance of some
// value that rounds to that infinity. So the tolerance judges infinities as it judges the rest. That
// matters where it is wide: a dx that cancels to about 0, but where rstd's rounding to f32 leaves the
// reference's terms a part in 1e8 apart, which with terms of 1e38 (dy near f32's maximum) is beyond
// the dtype in the reference and 0 in the kernels, both within the tolerance (about 1e-6 of the terms).
// For 16-bit dtypes `wide` is the reference's value in f32 (the same call on the same values, exact
// in f32), so that its rounding to the dtype is not taken for the value.
double DtypeMax(rmsnorm_dtype dtype) {
  switch (dtype) {
    case RMSNORM_F16: return 65504.0;
    case RMSNORM_BF16: return 0x1.fep127;
    default: return std::numeric_limits<float>::max();
  }
}

void ExpectRows(const Call& call, const char* what, std::vector<double> got, const std::vector<double>& want,
                const std::vector<double>& wide, const std::vector<double>& tolerance) {
  const double max = DtypeMax(call.config.dtype);
  // The values a result in the dtype stands for, as [lo, hi].
  const auto range = [max](double v, double* lo, double* hi) {
    *lo = v == std::numeric_limits<double>::infinity() ? max : v;
    *hi = v == -std::numeric_limits<double>::infinity() ? -max : v;
  };
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!(std::isinf(want[i]) || std::isinf(got[i])) || got[i] == want[i]) continue;
    const double reference = i < wide.size() && !std::isnan(wide[i]) ? wide[i] : want[i];
    if (std::isnan(got[i]) || std::isnan(reference)) continue;
    double got_lo, got_hi, ref_lo, ref_hi;
    range(got[i], &got_lo, &got_hi);
    range(reference, &ref_lo, &ref_hi);
    const double distance = std::max({0.0, got_lo - ref_hi, ref_lo - got_hi});
    const double t = std::isnan(tolerance[i]) ? std::numeric_limits<double>::infinity() : tolerance[i];
    if (distance <= t) got[i] = want[i];
  }
  Expect(call, what, got, want, tolerance);
}

// The inputs of a 16-bit dtype call as f32 (exact), for the wide reference above; for the fused add,
// the stored x + residual as x of a plain RMSNorm.
bool WideCase(const Case& c, const Inputs& in, const Outputs& forward, Case* wide_case, Inputs* wide) {
  if (c.dtype == RMSNORM_F32) return false;
  *wide_case = c;
  wide_case->dtype = RMSNORM_F32;
  const RowTensor& x = c.op == Op::kAddRmsNorm ? forward.residual_out : in.x;
  if (c.op == Op::kAddRmsNorm) wide_case->op = Op::kRmsNorm;
  *wide = in;
  wide->x = RowTensor(RMSNORM_F32, c.rows, c.cols);
  wide->dy = RowTensor(RMSNORM_F32, c.rows, c.cols);
  wide->residual = RowTensor(RMSNORM_F32, c.rows, c.cols);
  for (int64_t i = 0; i < c.rows * c.cols; ++i) {
    wide->x.set(i, x.get(i));
    if (in.dy.size() == c.rows * c.cols) wide->dy.set(i, in.dy.get(i));
  }
  return true;
}

// Compares an accepted call's outputs, read from `after`, with the reference's on the inputs in `before`.
void CheckAgainstReference(const Call& call, const std::vector<uint8_t>& before, const std::vector<uint8_t>& after) {
  Case c = CaseOf(call);
  c.weight = Find(call, registry::kWeight) != nullptr;
  Inputs in;
  in.x = RowsAt(call, before, Find(call, registry::kX));
  in.residual = RowsAt(call, before, Find(call, registry::kResidual));
  in.dy = RowsAt(call, before, Find(call, registry::kDy));
  in.weight = FloatsAt(before, Find(call, registry::kWeight));
  const bool backward = call.op->direction == registry::Direction::kBackward;
  const Tensor* bias = backward ? nullptr : Find(call, registry::kBias);
  c.bias = bias != nullptr;
  in.bias = FloatsAt(before, bias);

  const Outputs forward = RunForward(c, in, RMSNORM_BACKEND_REFERENCE);
  if (!backward) {
    const Tolerances tolerance = ForwardTolerances(c, in, forward);
    std::vector<double> wide_y;
    Case wide_case;
    Inputs wide;
    if (WideCase(c, in, forward, &wide_case, &wide)) wide_y = Values(RunForward(wide_case, wide, RMSNORM_BACKEND_REFERENCE).y);
    if (const Tensor* y = Find(call, registry::kY)) ExpectRows(call, "y", Values(RowsAt(call, after, y)), Values(forward.y), wide_y, tolerance.y);
    if (const Tensor* rstd = Find(call, registry::kRstd))
      Expect(call, "rstd", Values(FloatsAt(after, rstd)), Values(forward.rstd), tolerance.rstd);
    if (const Tensor* mean = Find(call, registry::kMean))
      Expect(call, "mean", Values(FloatsAt(after, mean)), Values(forward.mean), tolerance.mean);
    if (const Tensor* residual_out = Find(call, registry::kResidualOut)) {
      const std::vector<double> exact(size_t(c.rows * c.cols), 0.0);
      Expect(call, "residual_out", Values(RowsAt(call, after, residual_out)), Values(forward.residual_out), exact);
    }
    return;
  }
  // The backward takes the saved statistics of a row where its rstd is usable, else recomputes them:
  // the tolerances follow the statistics it uses.
  Outputs saved;
  saved.rstd = FloatsAt(before, Find(call, registry::kRstd));
  saved.mean = FloatsAt(before, Find(call, registry::kMean));
  const bool has_saved = !saved.rstd.empty();
  Outputs used = forward;
  for (int64_t row = 0; has_saved && row < c.rows; ++row) {
    const float rstd = saved.rstd[size_t(row)];
    const bool layer = !saved.mean.empty();
    if (layer ? !SavedLayerStatsUsable(saved.mean[size_t(row)], rstd) : !SavedRstdUsable(rstd)) continue;
    used.rstd[size_t(row)] = rstd;
    if (layer) used.mean[size_t(row)] = saved.mean[size_t(row)];
  }
  const Outputs reference = RunBackward(c, in, has_saved ? &saved : nullptr, RMSNORM_BACKEND_REFERENCE);
  const Tolerances tolerance = BackwardTolerances(c, in, used);
  std::vector<double> wide_dx;
  Case wide_case;
  Inputs wide;
  if (WideCase(c, in, forward, &wide_case, &wide))
    wide_dx = Values(RunBackward(wide_case, wide, has_saved ? &saved : nullptr, RMSNORM_BACKEND_REFERENCE).dx);
  if (const Tensor* dx = Find(call, registry::kDx)) ExpectRows(call, "dx", Values(RowsAt(call, after, dx)), Values(reference.dx), wide_dx, tolerance.dx);
  if (c.rows == 0) return;
  // In place (dx at dy or x), a column of dweight or dbias whose f32 sum leaves f32's range keeps it,
  // +-inf or NaN (the header's Extremes): allowed where the sum of the terms' magnitudes is beyond f32
  // (with a margin for the terms' rounding); elsewhere the reference's value is required.
  const Tensor* dx = Find(call, registry::kDx);
  const Tensor* dy = Find(call, registry::kDy);
  const Tensor* x = Find(call, registry::kX);
  const bool in_place = dx && ((dy && dx->offset == dy->offset) || (x && dx->offset == x->offset));
  std::vector<double> dweight_bound(size_t(c.cols), 0.0), dbias_bound(size_t(c.cols), 0.0);
  for (int64_t row = 0; in_place && row < c.rows; ++row) {
    const double mean = used.mean.empty() ? 0.0 : double(used.mean[size_t(row)]);
    const double rstd = used.rstd[size_t(row)];
    for (int64_t i = 0; i < c.cols; ++i) {
      const double dy_i = std::fabs(in.dy.get(row * c.cols + i));
      dweight_bound[size_t(i)] += dy_i * std::fabs(in.x.get(row * c.cols + i) - mean) * rstd;
      dbias_bound[size_t(i)] += dy_i;
    }
  }
  const auto expect_param_grad = [&](const char* what, const Tensor* t, const std::vector<float>& want,
                                     const std::vector<double>& bound, const std::vector<double>& tol) {
    if (t == nullptr) return;
    std::vector<double> got = Values(FloatsAt(after, t));
    for (size_t i = 0; in_place && i < got.size(); ++i)
      if (!std::isfinite(got[i]) && bound[i] > 0.999 * double(std::numeric_limits<float>::max())) got[i] = want[i];
    Expect(call, what, got, Values(want), tol);
  };
  expect_param_grad("dweight", Find(call, registry::kDweight), reference.dweight, dweight_bound, tolerance.dweight);
  expect_param_grad("dbias", Find(call, registry::kDbias), reference.dbias, dbias_bound, tolerance.dbias);
}

void Check(const Call& call) {
  std::vector<void*> ordered;
  std::vector<uint8_t> arena = call.arena;
  for (const Tensor& t : call.tensors) ordered.push_back(t.null ? nullptr : arena.data() + t.offset);
  const bool valid = ConfigValid(call) && (call.config.rows == 0 || TensorsValid(call));
  rmsnorm_status status;
  {
    const ScopedTarget target(AvailableTargets()[call.target]);
    status = call.op->call(&call.config, ordered.data());
  }

  const std::string name = call.op->c_function;
  if (status != RMSNORM_OK) {
    if (valid) Finding(call, name + " refused a valid call: " + rmsnorm_last_error());
    if (std::strncmp(rmsnorm_last_error(), name.c_str(), name.size()) != 0)
      Finding(call, name + " refused without its message: \"" + rmsnorm_last_error() + "\"");
    if (arena != call.arena) Finding(call, name + " wrote to a buffer of a refused call");
    return;
  }
  if (!valid) Finding(call, name + " accepted a call the contract refuses");
  // Only the outputs' bytes may change.
  std::vector<bool> writable(arena.size(), false);
  for (const Tensor& t : call.tensors)
    if (!t.null && registry::IsOutput(t.use.role) && call.config.rows > 0)
      std::fill(writable.begin() + long(t.offset), writable.begin() + long(t.offset + t.bytes), true);
  for (size_t b = 0; b < arena.size(); ++b)
    if (!writable[b] && arena[b] != call.arena[b])
      Finding(call, name + " wrote byte " + std::to_string(b) + " of the arena, outside its outputs");
  if (call.config.rows > 0 && call.saved_stats_in_contract) CheckAgainstReference(call, call.arena, arena);
}

}  // namespace
}  // namespace rmsnorm::test

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  rmsnorm::test::Check(rmsnorm::test::Decode(in));
  return 0;
}
