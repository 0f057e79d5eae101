#include "runtime/check.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "runtime/error.h"

namespace rmsnorm::runtime {
namespace {

std::string Number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.9g", v);
  return text;
}

[[noreturn]] void Fail(const char* fn, const std::string& what) { FailInvalid(std::string(fn) + ": " + what); }

// One buffer of a call, for the presence, alignment and overlap checks.
struct Buffer {
  const char* name;
  uintptr_t begin, end;
  bool output;
  bool row_tensor;  // (rows, cols) in dtype: may coincide with another row tensor, one in, one out
};

// The failures, out of line: building their messages would otherwise weigh on every call's checks
// (a decode row's whole call is a few hundred nanoseconds).
[[noreturn, gnu::noinline, gnu::cold]] void FailMissing(const char* fn, const char* name) {
  Fail(fn, std::string(name) + " is NULL");
}
[[noreturn, gnu::noinline, gnu::cold]] void FailMisaligned(const char* fn, const char* name, size_t align) {
  Fail(fn, std::string(name) + " is not aligned to its " + std::to_string(align) + "-byte elements");
}
[[noreturn, gnu::noinline, gnu::cold]] void FailOverlap(const char* fn, const char* a, const char* b) {
  Fail(fn, std::string(a) + " and " + b +
               " overlap; an output may only coincide exactly with an input row tensor (in place)");
}

class Buffers {
 public:
  Buffers(const char* fn, const Problem& p) : fn_(fn), p_(p) {}

  void Add(const registry::TensorUse& use, const void* data) {
    const registry::Shape shape = registry::Info(use.tensor).shape;
    const bool row_tensor = shape == registry::Shape::kRowsCols;
    const size_t size = row_tensor ? DtypeSize(p_.dtype) : sizeof(float);
    const size_t bytes = size_t(registry::Elements(shape, p_.rows, p_.cols)) * size;
    AddBuffer(registry::Info(use.tensor).name, data, bytes, size, registry::IsOutput(use.role), row_tensor,
        registry::IsRequired(use.role));
  }

  void CheckOverlaps() const {
    for (size_t i = 0; i < count_; ++i) {
      for (size_t j = i + 1; j < count_; ++j) {
        const Buffer& a = list_[i];
        const Buffer& b = list_[j];
        if (!(a.output || b.output) || a.begin >= b.end || b.begin >= a.end) continue;
        const bool in_place = a.row_tensor && b.row_tensor && a.begin == b.begin && a.output != b.output;
        if (!in_place) FailOverlap(fn_, a.name, b.name);
      }
    }
  }

 private:
  void AddBuffer(const char* name, const void* data, size_t bytes, size_t align, bool output, bool row_tensor,
           bool required) {
    const auto begin = reinterpret_cast<uintptr_t>(data);
    if (data == nullptr) {
      if (required) FailMissing(fn_, name);
      return;
    }
    if ((begin & (align - 1)) != 0) FailMisaligned(fn_, name, align);  // align is a power of two
    list_[count_++] = Buffer{name, begin, begin + bytes, output, row_tensor};
  }

  const char* fn_;
  const Problem& p_;
  Buffer list_[registry::kMaxOpTensors];  // no allocation on the hot path
  size_t count_ = 0;
};

}  // namespace

int64_t PartialSize(int64_t cols, float partial) {
  if (partial == 1.0f) return cols;
  // An f32 p is within half an ulp, 2^-24 relative, of the decimal the caller meant; so is p * cols.
  const double product = double(partial) * double(cols);
  const double nearest = std::nearbyint(product);
  const bool integral = std::fabs(product - nearest) <= product * 0x1p-24;
  const int64_t k = static_cast<int64_t>(integral ? nearest : std::ceil(product));
  return k < 1 ? 1 : (k > cols ? cols : k);
}

Problem CheckConfig(const char* fn, const rmsnorm_config* config, NormKind kind) {
  if (config == nullptr) Fail(fn, "config is NULL");
  const rmsnorm_config& c = *config;
  if (c.rows < 0) Fail(fn, "config->rows must be >= 0 (got " + std::to_string(c.rows) + ")");
  if (c.cols < 1) Fail(fn, "config->cols must be >= 1 (got " + std::to_string(c.cols) + ")");
  const int dtype = RawEnum(c.dtype);
  if (registry::FindDtype(dtype) == nullptr)
    Fail(fn, "config->dtype is not an rmsnorm_dtype (got " + std::to_string(dtype) + ")");
  // Every byte offset into the largest tensor must fit in ptrdiff_t. (Checked by an overflowing
  // multiplication: a division would cost a decode row more than all its other checks.)
  int64_t elements;
  if (__builtin_mul_overflow(c.rows, c.cols, &elements) || elements > INT64_MAX / 8)
    Fail(fn, "config->rows * config->cols is too large (" + std::to_string(c.rows) + " x " +
                 std::to_string(c.cols) + ")");
  if (!std::isfinite(c.eps) || c.eps < 0.0f) Fail(fn, "config->eps must be finite and >= 0 (got " + Number(c.eps) + ")");
  if (!(c.partial > 0.0f && c.partial <= 1.0f))
    Fail(fn, "config->partial must be in (0, 1] (got " + Number(c.partial) + ")");
  if (kind != NormKind::kRms && c.partial != 1.0f)
    Fail(fn, std::string("config->partial must be 1 for ") + (kind == NormKind::kLayer ? "LayerNorm" : "L2-Norm") +
                 " (got " + Number(c.partial) + ")");
  if (!std::isfinite(c.weight_offset)) Fail(fn, "config->weight_offset must be finite (got " + Number(c.weight_offset) + ")");

  Problem p;
  p.rows = c.rows;
  p.cols = c.cols;
  p.dtype = c.dtype;
  p.eps = c.eps;
  p.weight_offset = c.weight_offset;
  p.k = kind == NormKind::kRms ? PartialSize(c.cols, c.partial) : c.cols;
  p.divisor = kind == NormKind::kL2 ? 1 : p.k;
  return p;
}

template <registry::Op kOp>
void CheckTensors(const Problem& p, const void* const* ordered) {
  constexpr const registry::OpInfo& op = registry::Info(kOp);
  Buffers b(op.c_function, p);
  bool reads_mean = false, mean_given = false, rstd_given = false;
  for (size_t i = 0; i < op.num_tensors; ++i) {
    const registry::TensorUse& use = op.tensors[i];
    b.Add(use, ordered[i]);
    if (use.tensor == registry::kMean && !registry::IsOutput(use.role)) {
      reads_mean = true;
      mean_given = ordered[i] != nullptr;
    }
    if (use.tensor == registry::kRstd) rstd_given = ordered[i] != nullptr;
  }
  // A saved mean without its rstd (or the reverse) is a mistake, not a request to recompute one.
  if (reads_mean && mean_given != rstd_given)
    Fail(op.c_function, "mean and rstd must be both given or both NULL (to recompute)");
  b.CheckOverlaps();
}

// One instance per operation: its tensor list is known at compile time, so the loop above unrolls
// and each tensor's shape, role and name fold into its checks (a small call's checks are a fair part
// of it).
#define RMSNORM_OP(Id, ...) template void CheckTensors<registry::Op::k##Id>(const Problem&, const void* const*);
#include "registry/ops.inc"
#undef RMSNORM_OP

}  // namespace rmsnorm::runtime
