// Argument checks at the API boundary: always on, complete before anything is written, and each
// failure names the function and the argument.
#ifndef RMSNORM_SRC_RUNTIME_CHECK_H_
#define RMSNORM_SRC_RUNTIME_CHECK_H_

#include <cstdint>
#include <cstring>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"
#include "runtime/problem.h"

namespace rmsnorm::runtime {

using registry::NormKind;

// Checks the config (rows, cols, their product, dtype, eps, partial, weight_offset) and derives the
// Problem: k and divisor follow the norm kind.
Problem CheckConfig(const char* fn, const rmsnorm_config* config, NormKind kind);

// The same for an extended config (its size field, then the base config through CheckConfig, then
// inner_rows and each row tensor's strides), deriving the Problem's row layouts: packed layouts leave
// it unstrided, and a two-level layout that is one level in every tensor is made one level. With a
// quantized format, config->y's strides are q's (registry::kQ), in q's elements, and cols must be a
// multiple of the format's unit_cols.
Problem CheckConfigEx(const char* fn, const rmsnorm_config_ex* config, NormKind kind,
                      const registry::QuantFormatInfo* quant = nullptr);

// Checks the tensors of a call of operation kOp (fn names it in messages) with rows > 0, given in the
// op's C parameter order (see registry/ops.inc): required pointers present, each aligned to its element
// type, a saved mean read only with its rstd, and no two buffers overlapping except an output that
// coincides exactly (pointer and layout) with an input row tensor (in-place use).
template <registry::Op kOp>
void CheckTensors(const char* fn, const Problem& p, const void* const* ordered);

// The same for a quantized call (registry::QuantInfo(kBase)'s tensors): q at the format's element
// size and layout, never in place; scales as the format says (written per row, one finite positive
// value read, or NULL); and, like the others, no overlap.
template <registry::Op kBase>
void CheckQuantizedTensors(const char* fn, const Problem& p, const registry::QuantFormatInfo& format,
                           const void* const* ordered);

// k = max(1, ceil(partial * cols)), a product within f32 rounding of an integer taken as that integer.
// Assumes cols >= 1 and partial in (0, 1].
int64_t PartialSize(int64_t cols, float partial);

// An enum's value as the integer a C caller passed: any int is legal in C, but reading an
// out-of-range value through the enum type is undefined in C++, so checks read the bytes.
template <class Enum>
int RawEnum(const Enum& value) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are int-sized on the supported ABIs");
  int raw;
  std::memcpy(&raw, &value, sizeof raw);
  return raw;
}

}  // namespace rmsnorm::runtime

#endif  // RMSNORM_SRC_RUNTIME_CHECK_H_
