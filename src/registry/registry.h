// The registry: what a dtype, a tensor, an operation and a norm are, each defined once (dtypes.inc,
// ops.inc, norms.inc) and turned here into constexpr tables and typed dispatch. Everything that needs
// a dtype's size, a list of operations or a list of norms asks this header, in the library, the tests,
// the benchmark, the reproduction and the Python binding alike. Header-only and dependency-free beyond
// the public headers, so every part of the tree can include it.
#ifndef RMSNORM_SRC_REGISTRY_REGISTRY_H_
#define RMSNORM_SRC_REGISTRY_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <type_traits>
#include <utility>

#include "rmsnorm/rmsnorm.h"
#include "rmsnorm/rmsnorm.hpp"

namespace rmsnorm::registry {

// ---- Dtypes (dtypes.inc) --------------------------------------------------------------------------

struct DtypeInfo {
  rmsnorm_dtype code;
  const char* name;
  size_t size;  // bytes per element
  int mantissa_bits, min_exponent;
  const char* numpy;
  const char* torch;
};

inline constexpr DtypeInfo kDtypes[] = {
#define RMSNORM_DTYPE(Id, code, name, Storage, KernelStorage, mantissa, min_exponent, numpy, torch) \
  {code, name, sizeof(Storage), mantissa, min_exponent, numpy, torch},
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE
};

// The entry of a dtype code, or null for an integer that is no rmsnorm_dtype (any int is legal in C).
constexpr const DtypeInfo* FindDtype(int code) {
  for (const DtypeInfo& d : kDtypes)
    if (int(d.code) == code) return &d;
  return nullptr;
}
// For a checked dtype (the C ABI refuses the others before anything asks).
constexpr const DtypeInfo& Dtype(rmsnorm_dtype dtype) { return *FindDtype(int(dtype)); }
constexpr size_t DtypeSize(rmsnorm_dtype dtype) { return Dtype(dtype).size; }
constexpr const char* DtypeName(rmsnorm_dtype dtype) { return Dtype(dtype).name; }

// fn(Storage{}) with Storage the C++ storage type of dtype (float, rmsnorm::bf16, rmsnorm::f16). The
// SIMD kernels have their own, with Highway's types (src/cpu/dispatch.h).
template <class Fn>
void WithStorage(rmsnorm_dtype dtype, const Fn& fn) {
  switch (dtype) {
#define RMSNORM_DTYPE(Id, code, name, Storage, ...) \
  case code:                                      \
    return fn(Storage{});
#include "registry/dtypes.inc"
#undef RMSNORM_DTYPE
  }
}

// A storage value as float, and a float rounded to the storage type (round to nearest even, NaN kept
// quiet, overflow to infinity): the scalar conversions every storage type defines.
template <class Storage>
float ToFloat(Storage v) {
  return static_cast<float>(v);
}
template <class Storage>
Storage FromFloat(float v) {
  return Storage(v);
}

// ---- Tensors ----------------------------------------------------------------------------------------

// Unscoped (Tensor::kX and kX alike), so that the lines of ops.inc read as plain lists.
// kQ and kScales are the quantized calls' outputs (see kQuantFormats), in no op of ops.inc.
enum Tensor { kX, kResidual, kWeight, kBias, kY, kResidualOut, kMean, kRstd, kDy, kDx, kDweight, kDbias, kQ, kScales };
constexpr size_t kNumTensors = 14;

// (rows, cols) in the config's dtype, or (cols) / (rows) in f32; kQuantized: (rows, cols / unit_cols)
// elements of the format's unit_bytes; kScales: as the format's scales say.
enum class Shape { kRowsCols, kCols, kRows, kQuantized, kScales };

struct TensorInfo {
  Tensor tensor;
  const char* name;
  Shape shape;
};

inline constexpr TensorInfo kTensors[kNumTensors] = {
    {Tensor::kX, "x", Shape::kRowsCols},          {Tensor::kResidual, "residual", Shape::kRowsCols},
    {Tensor::kWeight, "weight", Shape::kCols},    {Tensor::kBias, "bias", Shape::kCols},
    {Tensor::kY, "y", Shape::kRowsCols},          {Tensor::kResidualOut, "residual_out", Shape::kRowsCols},
    {Tensor::kMean, "mean", Shape::kRows},        {Tensor::kRstd, "rstd", Shape::kRows},
    {Tensor::kDy, "dy", Shape::kRowsCols},        {Tensor::kDx, "dx", Shape::kRowsCols},
    {Tensor::kDweight, "dweight", Shape::kCols},  {Tensor::kDbias, "dbias", Shape::kCols},
    {Tensor::kQ, "q", Shape::kQuantized},         {Tensor::kScales, "scales", Shape::kScales},
};
constexpr const TensorInfo& Info(Tensor t) { return kTensors[size_t(t)]; }

// Elements of a tensor of this shape (rows * cols fits: the C ABI checks that first).
constexpr int64_t Elements(Shape shape, int64_t rows, int64_t cols) {
  return shape == Shape::kRowsCols ? rows * cols : (shape == Shape::kCols ? cols : rows);
}

// ---- Operations (ops.inc) ---------------------------------------------------------------------------

// The statistic: RMSNorm and pRMSNorm share kRms (k and the divisor tell them apart).
enum class NormKind { kRms, kL2, kLayer };
enum class Direction { kForward, kBackward };
enum Role { kIn, kOptIn, kOut, kOptOut };  // unscoped, as Tensor
constexpr bool IsOutput(Role r) { return r == Role::kOut || r == Role::kOptOut; }
constexpr bool IsRequired(Role r) { return r == Role::kIn || r == Role::kOut; }

struct TensorUse {
  Tensor tensor;
  Role role;
};

enum class Op {
#define RMSNORM_OP(Id, ...) k##Id,
#include "registry/ops.inc"
#undef RMSNORM_OP
};

// An operation's tensors indexed by Tensor (null = absent), so callers fill them by name.
struct TensorPointers {
  void* at[kNumTensors] = {};
  void*& operator[](Tensor t) { return at[size_t(t)]; }
  void* operator[](Tensor t) const { return at[size_t(t)]; }
  void Set(Tensor t, const void* p) { at[size_t(t)] = const_cast<void*>(p); }  // the C call keeps inputs const
};

constexpr size_t kMaxOpTensors = 8;

struct OpInfo {
  Op op;
  const char* c_function;   // "rmsnorm_forward": also what messages name
  const char* python_name;  // "rms_forward": rmsnorm._C
  NormKind kind;
  Direction direction;
  TensorUse tensors[kMaxOpTensors];  // in C parameter order
  size_t num_tensors;
  // Calls the C function with the pointers in `ordered` (C parameter order).
  rmsnorm_status (*call)(const rmsnorm_config* config, void* const* ordered);
  // The same for the function's _ex twin (an rmsnorm_config_ex: strided rows), and its name.
  const char* c_function_ex;
  rmsnorm_status (*call_ex)(const rmsnorm_config_ex* config, void* const* ordered);

  // t's position in the C parameter list (after the config), or -1 when the op does not take it.
  constexpr int ParameterIndex(Tensor t) const {
    for (size_t i = 0; i < num_tensors; ++i)
      if (tensors[i].tensor == t) return int(i);
    return -1;
  }
  constexpr bool Takes(Tensor t) const { return ParameterIndex(t) >= 0; }
  // Calls the C function with the tensors picked by name from `pointers`.
  rmsnorm_status Call(const rmsnorm_config* config, const TensorPointers& pointers) const {
    void* ordered[kMaxOpTensors] = {};
    for (size_t i = 0; i < num_tensors; ++i) ordered[i] = pointers[tensors[i].tensor];
    return call(config, ordered);
  }
  rmsnorm_status Call(const rmsnorm_config_ex* config, const TensorPointers& pointers) const {
    void* ordered[kMaxOpTensors] = {};
    for (size_t i = 0; i < num_tensors; ++i) ordered[i] = pointers[tensors[i].tensor];
    return call_ex(config, ordered);
  }
};

namespace detail {

// A void* that converts to whichever pointer type the C parameter has.
struct AnyPointer {
  void* p;
  template <class T>
  operator T*() const {  // NOLINT: implicit by design
    return static_cast<T*>(p);
  }
};

template <auto kFunction, class Config, size_t... I>
rmsnorm_status CallOrdered(const Config* config, void* const* ordered, std::index_sequence<I...>) {
  return kFunction(config, AnyPointer{ordered[I]}...);
}
template <auto kFunction, class Config, size_t kCount>
rmsnorm_status CallWith(const Config* config, void* const* ordered) {
  return CallOrdered<kFunction>(config, ordered, std::make_index_sequence<kCount>());
}

// The C parameter type a use of a tensor must have: a row tensor is void (in the config's dtype), the
// rest float; inputs are const.
template <class P>
constexpr int PointerCode() {
  if (std::is_same_v<P, const void*>) return 0;
  if (std::is_same_v<P, void*>) return 1;
  if (std::is_same_v<P, const float*>) return 2;
  if (std::is_same_v<P, float*>) return 3;
  return -1;
}
constexpr int ExpectedCode(TensorUse use) {
  return (Info(use.tensor).shape == Shape::kRowsCols ? 0 : 2) + (IsOutput(use.role) ? 1 : 0);
}
template <class Config, class... P>
constexpr bool SignatureMatches(rmsnorm_status (*)(const Config*, P...), std::initializer_list<TensorUse> uses) {
  constexpr int codes[] = {PointerCode<P>()..., 0};
  if (sizeof...(P) != uses.size()) return false;
  size_t i = 0;
  for (TensorUse use : uses)
    if (codes[i++] != ExpectedCode(use)) return false;
  return true;
}

constexpr OpInfo MakeOp(Op op, const char* c_function, const char* python_name, NormKind kind, Direction direction,
                        std::initializer_list<TensorUse> tensors,
                        rmsnorm_status (*call)(const rmsnorm_config*, void* const*), const char* c_function_ex,
                        rmsnorm_status (*call_ex)(const rmsnorm_config_ex*, void* const*)) {
  OpInfo info{op, c_function, python_name, kind, direction, {}, tensors.size(), call, c_function_ex, call_ex};
  size_t i = 0;
  for (TensorUse use : tensors) info.tensors[i++] = use;
  return info;
}

}  // namespace detail

// Each line of ops.inc against its C signature: the tensors' count, order, constness and kind.
#define RMSNORM_OP(Id, c_function, python_name, kind, direction, ...) \
  static_assert(detail::SignatureMatches(&c_function, {__VA_ARGS__}) &&  \
                    detail::SignatureMatches(&c_function##_ex, {__VA_ARGS__}), \
                "ops.inc: the tensors of " #c_function " do not match its signature in rmsnorm.h");
#include "registry/ops.inc"
#undef RMSNORM_OP

inline constexpr OpInfo kOps[] = {
#define RMSNORM_OP(Id, c_function, python_name, kind, direction, ...)                                          \
  detail::MakeOp(Op::k##Id, #c_function, python_name, NormKind::kind, Direction::direction,                   \
                 {__VA_ARGS__},                                                                                \
                 &detail::CallWith<&c_function, rmsnorm_config, std::initializer_list<TensorUse>{__VA_ARGS__}.size()>, \
                 #c_function "_ex",                                                                            \
                 &detail::CallWith<&c_function##_ex, rmsnorm_config_ex,                                         \
                                   std::initializer_list<TensorUse>{__VA_ARGS__}.size()>),
#include "registry/ops.inc"
#undef RMSNORM_OP
};
constexpr const OpInfo& Info(Op op) { return kOps[size_t(op)]; }

// The tables are indexed by their enums, and a dtype code names one entry.
namespace detail {
constexpr bool TablesInOrder() {
  for (size_t i = 0; i < kNumTensors; ++i)
    if (size_t(kTensors[i].tensor) != i) return false;
  for (size_t i = 0; i < std::size(kOps); ++i)
    if (size_t(kOps[i].op) != i) return false;
  for (size_t i = 0; i < std::size(kDtypes); ++i) {
    if ((kDtypes[i].size & (kDtypes[i].size - 1)) != 0) return false;  // the checks align to the size
    for (size_t j = 0; j < i; ++j)
      if (kDtypes[j].code == kDtypes[i].code) return false;
  }
  return true;
}
static_assert(TablesInOrder(), "registry tables out of order, or a dtype code or size is wrong");
}  // namespace detail

// ---- Quantized outputs (quant_formats.inc) ----------------------------------------------------------

enum class QuantScales { kPerRow, kStatic, kInBlocks };

struct QuantFormatInfo {
  rmsnorm_quant_format code;
  const char* name;
  size_t unit_bytes;  // one element of q
  int64_t unit_cols;  // columns per element of q
  QuantScales scales;
};

inline constexpr QuantFormatInfo kQuantFormats[] = {
#define RMSNORM_QUANT_FORMAT(Id, code, name, unit_bytes, unit_cols, scales) \
  {code, name, unit_bytes, unit_cols, QuantScales::scales},
#include "registry/quant_formats.inc"
#undef RMSNORM_QUANT_FORMAT
};

// The entry of a format code, or null for an integer that is no rmsnorm_quant_format.
constexpr const QuantFormatInfo* FindQuantFormat(int code) {
  for (const QuantFormatInfo& f : kQuantFormats)
    if (int(f.code) == code) return &f;
  return nullptr;
}

// A quantized call: the forward `base` of ops.inc with y replaced by q and scales (in that order, where
// y was), under its own C function, which takes an rmsnorm_config_ex and the format first.
struct QuantOpInfo {
  Op base;
  const char* c_function;
  TensorUse tensors[kMaxOpTensors];  // in C parameter order, after the config and the format
  size_t num_tensors;
  constexpr int ParameterIndex(Tensor t) const {
    for (size_t i = 0; i < num_tensors; ++i)
      if (tensors[i].tensor == t) return int(i);
    return -1;
  }
};

namespace detail {
constexpr QuantOpInfo MakeQuantOp(Op base, const char* c_function) {
  QuantOpInfo info{base, c_function, {}, 0};
  const OpInfo& op = kOps[size_t(base)];
  for (size_t i = 0; i < op.num_tensors; ++i) {
    if (op.tensors[i].tensor == kY) {
      info.tensors[info.num_tensors++] = {kQ, kOut};
      info.tensors[info.num_tensors++] = {kScales, kOptOut};  // its role depends on the format (checks)
    } else {
      info.tensors[info.num_tensors++] = op.tensors[i];
    }
  }
  return info;
}
constexpr int QuantExpectedCode(TensorUse use) {
  if (use.tensor == kQ) return 1;       // void*
  if (use.tensor == kScales) return 3;  // float*, read for a static scale
  return ExpectedCode(use);
}
template <class... P>
constexpr bool QuantSignatureMatches(rmsnorm_status (*)(const rmsnorm_config_ex*, rmsnorm_quant_format, P...),
                                     const QuantOpInfo& op) {
  constexpr int codes[] = {PointerCode<P>()..., 0};
  if (sizeof...(P) != op.num_tensors) return false;
  for (size_t i = 0; i < op.num_tensors; ++i)
    if (codes[i] != QuantExpectedCode(op.tensors[i])) return false;
  return true;
}
}  // namespace detail

inline constexpr QuantOpInfo kQuantOps[] = {
    detail::MakeQuantOp(Op::kRmsForward, "rmsnorm_forward_quantized"),
    detail::MakeQuantOp(Op::kRmsAddForward, "rmsnorm_add_forward_quantized"),
};
// The quantized twin of a forward of ops.inc (RmsForward or RmsAddForward).
constexpr const QuantOpInfo& QuantInfo(Op base) { return base == Op::kRmsForward ? kQuantOps[0] : kQuantOps[1]; }
static_assert(detail::QuantSignatureMatches(&rmsnorm_forward_quantized, kQuantOps[0]) &&
                  detail::QuantSignatureMatches(&rmsnorm_add_forward_quantized, kQuantOps[1]),
              "kQuantOps: the tensors do not match the signatures in rmsnorm.h");

// ---- Norms (norms.inc) ------------------------------------------------------------------------------

enum class Norm {
#define RMSNORM_NORM(Id, ...) k##Id,
#include "registry/norms.inc"
#undef RMSNORM_NORM
};

struct NormInfo {
  Norm norm;
  const char* name;
  const char* label;
  bool partial;
  Op forward, backward;
  bool fused_add() const { return forward == Op::kRmsAddForward; }
};

inline constexpr NormInfo kNorms[] = {
#define RMSNORM_NORM(Id, name, label, partial, forward, backward) \
  {Norm::k##Id, name, label, partial, Op::k##forward, Op::k##backward},
#include "registry/norms.inc"
#undef RMSNORM_NORM
};
constexpr const NormInfo& Info(Norm norm) { return kNorms[size_t(norm)]; }

}  // namespace rmsnorm::registry

#endif  // RMSNORM_SRC_REGISTRY_REGISTRY_H_
