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
// AddressSanitizer and UndefinedBehaviorSanitizer, which the library is built with for this program,
// report the rest. A finding aborts, so that libFuzzer keeps the input.
#include <fuzzer/FuzzedDataProvider.h>

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
};

int32_t RawDtype(const rmsnorm_config& c) {
  int32_t raw;
  static_assert(sizeof raw == sizeof c.dtype);
  std::memcpy(&raw, &c.dtype, sizeof raw);
  return raw;
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

[[noreturn]] void Finding(const Call& call, const std::string& what) {
  std::fprintf(stderr, "FINDING: %s\n  in %s\n", what.c_str(), Describe(call).c_str());
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

// Compares an accepted call's outputs, read from `after`, with the reference's on the inputs in `before`.
void CheckAgainstReference(const Call& call, const std::vector<uint8_t>& before, const std::vector<uint8_t>& after) {
  Case c;
  c.op = NormOf(*call.op);
  c.dtype = call.config.dtype;
  c.rows = call.config.rows;
  c.cols = call.config.cols;
  c.partial = call.config.partial;
  c.eps = call.config.eps;
  c.weight_offset = call.config.weight_offset;
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
    if (const Tensor* y = Find(call, registry::kY)) Expect(call, "y", Values(RowsAt(call, after, y)), Values(forward.y), tolerance.y);
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
  if (const Tensor* dx = Find(call, registry::kDx)) Expect(call, "dx", Values(RowsAt(call, after, dx)), Values(reference.dx), tolerance.dx);
  if (c.rows == 0) return;
  if (const Tensor* dweight = Find(call, registry::kDweight))
    Expect(call, "dweight", Values(FloatsAt(after, dweight)), Values(reference.dweight), tolerance.dweight);
  if (const Tensor* dbias = Find(call, registry::kDbias))
    Expect(call, "dbias", Values(FloatsAt(after, dbias)), Values(reference.dbias), tolerance.dbias);
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
  if (call.config.rows > 0) CheckAgainstReference(call, call.arena, arena);
}

}  // namespace
}  // namespace rmsnorm::test

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  rmsnorm::test::Check(rmsnorm::test::Decode(in));
  return 0;
}
