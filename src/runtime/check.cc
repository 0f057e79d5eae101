#include "runtime/check.h"

#include <cmath>
#include <cstdio>
#include <cstring>
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
  registry::Tensor tensor;
  uintptr_t begin, end;  // the bytes from its first to its last element
  bool output;
  bool row_tensor;  // rows of row_elements elements of element_size bytes at Problem::RowStart
  bool in_place;    // a row tensor that may coincide with another, one in, one out (q may not)
  size_t element_size;
  int64_t row_elements;
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
    // Rows lie in row order (CheckConfigEx), so the last row ends the tensor.
    const int64_t elements = row_tensor ? p_.RowStart(use.tensor, p_.rows - 1) + p_.cols
                                        : registry::Elements(shape, p_.rows, p_.cols);
    AddBuffer(use.tensor, data, size_t(elements) * size, size, registry::IsOutput(use.role), row_tensor,
              registry::IsRequired(use.role), row_tensor, p_.cols);
  }

  // A quantized call's q: rows of cols / unit_cols elements of unit_bytes, aligned to the bytes of
  // the element types inside (a q8_0 block's f16 scale: 2).
  void AddQuantized(const registry::QuantFormatInfo& format, const void* data) {
    const int64_t row_elements = p_.cols / format.unit_cols;
    const int64_t elements = p_.RowStart(registry::kQ, p_.rows - 1) + row_elements;
    const size_t align = format.unit_bytes % 2 == 0 ? 2 : 1;
    AddBuffer(registry::kQ, data, size_t(elements) * format.unit_bytes, align, true, true, true, false, row_elements,
              format.unit_bytes);
  }

  // Its scales: written per row, one read, or none (NULL), as the format says.
  void AddScales(const char* fn, const registry::QuantFormatInfo& format, const float* scales) {
    switch (format.scales) {
      case registry::QuantScales::kInBlocks:
        if (scales != nullptr)
          Fail(fn, std::string("scales must be NULL for ") + format.name + ": its scales are in the blocks");
        return;
      case registry::QuantScales::kPerRow:
        if (scales == nullptr) Fail(fn, std::string("scales is NULL; ") + format.name + " writes one f32 scale per row");
        AddBuffer(registry::kScales, scales, size_t(p_.rows) * sizeof(float), sizeof(float), true, false, true);
        return;
      case registry::QuantScales::kStatic:
        if (scales == nullptr) Fail(fn, std::string("scales is NULL; ") + format.name + " reads the static scale *scales");
        AddBuffer(registry::kScales, scales, sizeof(float), sizeof(float), false, false, true);
        if (!(std::isfinite(*scales) && *scales > 0.0f))
          Fail(fn, std::string("the static scale *scales must be finite and > 0 for ") + format.name + " (got " +
                       Number(*scales) + ")");
        return;
    }
  }

  void CheckOverlaps() const {
    for (size_t i = 0; i < count_; ++i) {
      for (size_t j = i + 1; j < count_; ++j) {
        const Buffer& a = list_[i];
        const Buffer& b = list_[j];
        if (!(a.output || b.output) || a.begin >= b.end || b.begin >= a.end) continue;
        const bool same_rows = a.in_place && b.in_place && a.begin == b.begin && SameLayout(a.tensor, b.tensor);
        if (same_rows && a.output != b.output) continue;  // in place
        if (same_rows || !p_.strided || ElementsOverlap(a, b)) FailOverlap(fn_, a.name, b.name);
      }
    }
  }

 private:
  void AddBuffer(registry::Tensor tensor, const void* data, size_t bytes, size_t align, bool output,
                 bool row_tensor, bool required, bool in_place = false, int64_t row_elements = 0,
                 size_t element_size = 0) {
    const char* name = registry::Info(tensor).name;
    const auto begin = reinterpret_cast<uintptr_t>(data);
    if (data == nullptr) {
      if (required) FailMissing(fn_, name);
      return;
    }
    if ((begin & (align - 1)) != 0) FailMisaligned(fn_, name, align);  // align is a power of two
    if (bytes > UINTPTR_MAX - begin) Fail(fn_, std::string(name) + " extends past the end of the address space");
    if (element_size == 0) element_size = align;
    list_[count_++] = Buffer{name, tensor, begin, begin + bytes, output, row_tensor, in_place, element_size, row_elements};
  }

  bool SameLayout(registry::Tensor a, registry::Tensor b) const {
    return !p_.strided || (p_.layout[a].outer == p_.layout[b].outer && p_.layout[a].inner == p_.layout[b].inner);
  }

  // A buffer's k-th run of bytes: a row of a row tensor, or the whole of another buffer.
  int64_t Runs(const Buffer& b) const { return b.row_tensor ? p_.rows : 1; }
  uintptr_t RunBegin(const Buffer& b, int64_t k) const {
    return b.row_tensor ? b.begin + uintptr_t(p_.RowStart(b.tensor, k)) * b.element_size : b.begin;
  }
  uintptr_t RunEnd(const Buffer& b, int64_t k) const {
    return b.row_tensor ? RunBegin(b, k) + uintptr_t(b.row_elements) * b.element_size : b.end;
  }

  // Whether any byte of a's rows is a byte of b's, for strided rows whose spans intersect (rows of two
  // tensors may interleave in one buffer). Each buffer's runs are disjoint and ascending, so one merge
  // of the two lists decides it.
  bool ElementsOverlap(const Buffer& a, const Buffer& b) const {
    int64_t i = 0, j = 0;
    while (i < Runs(a) && j < Runs(b)) {
      if (RunEnd(a, i) <= RunBegin(b, j)) {
        ++i;
      } else if (RunEnd(b, j) <= RunBegin(a, i)) {
        ++j;
      } else {
        return true;
      }
    }
    return false;
  }

  const char* fn_;
  const Problem& p_;
  Buffer list_[registry::kMaxOpTensors];  // no allocation on the hot path (a quantized op has no more)
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

Problem CheckConfigEx(const char* fn, const rmsnorm_config_ex* config, NormKind kind,
                      const registry::QuantFormatInfo* quant) {
  if (config == nullptr) Fail(fn, "config is NULL");
  // Read no byte past the caller's struct: an older caller's is shorter, and its missing fields take
  // their zero defaults; a newer caller's unknown fields must be zero.
  uint64_t size;
  std::memcpy(&size, config, sizeof size);
  constexpr uint64_t kKnown = sizeof(rmsnorm_config_ex);
  if (size < kKnown)
    Fail(fn, "config->struct_size is " + std::to_string(size) + ", smaller than any rmsnorm_config_ex (" +
                 std::to_string(kKnown) + "): initialize it with rmsnorm_config_ex_init");
  if (size > kKnown) {
    if (size > (uint64_t{1} << 20)) Fail(fn, "config->struct_size is implausible (" + std::to_string(size) + ")");
    const auto* bytes = reinterpret_cast<const unsigned char*>(config);
    for (uint64_t i = kKnown; i < size; ++i)
      if (bytes[i] != 0)
        FailUnsupported(std::string(fn) + ": config->struct_size is " + std::to_string(size) + " and byte " +
                        std::to_string(i) + " is set, a field this library (older than the caller's header) "
                        "does not know");
  }
  rmsnorm_config_ex c;
  std::memcpy(&c, config, kKnown);

  Problem p = CheckConfig(fn, &c.base, kind);
  if (quant != nullptr && c.base.cols % quant->unit_cols != 0)
    Fail(fn, "config->base.cols (" + std::to_string(c.base.cols) + ") must be a multiple of " +
                 std::to_string(quant->unit_cols) + " for " + quant->name + " (whole blocks along the row)");
  if (c.inner_rows < 0) Fail(fn, "config->inner_rows must be >= 0 (got " + std::to_string(c.inner_rows) + ")");
  const int64_t inner_rows = c.inner_rows == 0 ? 1 : c.inner_rows;
  if (p.rows % inner_rows != 0)
    Fail(fn, "config->inner_rows (" + std::to_string(inner_rows) + ") must divide config->base.rows (" +
                 std::to_string(p.rows) + ")");
  const int64_t outer_rows = p.rows / inner_rows;

  // A quantized call's q takes config->y's strides, counted in its own elements, whose rows are
  // cols / unit_cols long.
  struct Given {
    registry::Tensor tensor;
    rmsnorm_row_strides strides;
    int64_t cols;
  };
  const int64_t y_cols = quant ? p.cols / quant->unit_cols : p.cols;
  const Given given[] = {{registry::kX, c.x, p.cols},
                         {registry::kResidual, c.residual, p.cols},
                         {quant ? registry::kQ : registry::kY, c.y, y_cols},
                         {registry::kResidualOut, c.residual_out, p.cols},
                         {registry::kDy, c.dy, p.cols},
                         {registry::kDx, c.dx, p.cols}};
  // Problem::RowStart of an unstrided call counts cols elements a row: q8_0's q needs its layout.
  bool packed = y_cols == p.cols, one_level = true;
  for (const Given& g : given) {
    // Only a failure spells the name out: a small call must not pay for six strings.
    const auto name = [&g] {
      return g.tensor == registry::kQ ? std::string("config->y (q's rows, in q's elements)")
                                      : std::string("config->") + registry::Info(g.tensor).name;
    };
    if (g.strides.outer < 0 || g.strides.inner < 0)
      Fail(fn, name() + " strides must be >= 0 (got outer " + std::to_string(g.strides.outer) + ", inner " +
                   std::to_string(g.strides.inner) + ")");
    RowLayout l;
    l.inner = g.strides.inner == 0 || inner_rows == 1 ? g.cols : g.strides.inner;
    if (g.strides.outer != 0) {
      l.outer = g.strides.outer;
    } else if (__builtin_mul_overflow(inner_rows, l.inner, &l.outer)) {
      Fail(fn, name() + ": inner_rows * inner stride is too large");
    }
    // Rows disjoint and in row order: the overlap checks and the kernels' prefetches rely on it.
    if (inner_rows > 1 && l.inner < g.cols)
      Fail(fn, name() + ".inner (" + std::to_string(l.inner) + ") must be >= cols (" + std::to_string(g.cols) +
                   "): rows may not overlap");
    // The last row's start, and the end of the tensor, in elements, whose bytes must fit (up to 8 an
    // element; a q8_0 block of q has 34).
    int64_t last = 0, end = 0;
    int64_t inner_span = 0;
    if (__builtin_mul_overflow(outer_rows > 0 ? outer_rows - 1 : 0, l.outer, &last) ||
        __builtin_mul_overflow(inner_rows - 1, l.inner, &inner_span) ||
        __builtin_add_overflow(last, inner_span, &last) ||
        __builtin_add_overflow(last, g.cols, &end) || end > INT64_MAX / (g.tensor == registry::kQ ? 64 : 8))
      Fail(fn, name() + ": the strides reach too far (" + std::to_string(l.outer) + ", " + std::to_string(l.inner) + ")");
    if (outer_rows > 1 && l.outer < inner_span + g.cols)
      Fail(fn, name() + ".outer (" + std::to_string(l.outer) + ") must be >= (inner_rows - 1) * inner + cols (" +
                   std::to_string(inner_span + g.cols) + "): rows may not overlap or go out of order");
    packed = packed && l.inner == g.cols && l.outer == inner_rows * g.cols;
    one_level = one_level && l.outer == inner_rows * l.inner;
    p.layout[g.tensor] = l;
  }
  if (packed) return p;  // every row tensor as the plain call has it
  p.strided = true;
  p.inner_rows = inner_rows;
  if (one_level && inner_rows > 1) {  // no division per row in the kernels
    for (const Given& g : given) p.layout[g.tensor].outer = p.layout[g.tensor].inner;
    p.inner_rows = 1;
  }
  return p;
}

template <registry::Op kOp>
void CheckTensors(const char* fn, const Problem& p, const void* const* ordered) {
  constexpr const registry::OpInfo& op = registry::Info(kOp);
  Buffers b(fn, p);
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
    Fail(fn, "mean and rstd must be both given or both NULL (to recompute)");
  b.CheckOverlaps();
}

template <registry::Op kBase>
void CheckQuantizedTensors(const char* fn, const Problem& p, const registry::QuantFormatInfo& format,
                           const void* const* ordered) {
  constexpr const registry::QuantOpInfo& op = registry::QuantInfo(kBase);
  Buffers b(fn, p);
  for (size_t i = 0; i < op.num_tensors; ++i) {
    const registry::TensorUse& use = op.tensors[i];
    if (use.tensor == registry::kQ) {
      b.AddQuantized(format, ordered[i]);
    } else if (use.tensor == registry::kScales) {
      b.AddScales(fn, format, static_cast<const float*>(ordered[i]));
    } else {
      b.Add(use, ordered[i]);
    }
  }
  b.CheckOverlaps();
}
template void CheckQuantizedTensors<registry::Op::kRmsForward>(const char*, const Problem&,
                                                              const registry::QuantFormatInfo&, const void* const*);
template void CheckQuantizedTensors<registry::Op::kRmsAddForward>(const char*, const Problem&,
                                                                 const registry::QuantFormatInfo&, const void* const*);

// One instance per operation: its tensor list is known at compile time, so the loop above unrolls
// and each tensor's shape, role and name fold into its checks (a small call's checks are a fair part
// of it).
#define RMSNORM_OP(Id, ...) template void CheckTensors<registry::Op::k##Id>(const char*, const Problem&, const void* const*);
#include "registry/ops.inc"
#undef RMSNORM_OP

}  // namespace rmsnorm::runtime
