// Scalar conversions between the storage types and double, for the reference.
#ifndef RMSNORM_SRC_REF_STORAGE_H_
#define RMSNORM_SRC_REF_STORAGE_H_

#include "rmsnorm/rmsnorm.hpp"

namespace rmsnorm::ref {

inline double ToDouble(double v) { return v; }
inline double ToDouble(float v) { return v; }
inline double ToDouble(bf16 v) { return static_cast<float>(v); }
inline double ToDouble(f16 v) { return static_cast<float>(v); }

// bf16/f16 round through f32, as the kernels do (f32 result, then one rounding to storage).
template <class T>
T FromDouble(double v);
template <>
inline double FromDouble<double>(double v) { return v; }
template <>
inline float FromDouble<float>(double v) { return static_cast<float>(v); }
template <>
inline bf16 FromDouble<bf16>(double v) { return bf16(static_cast<float>(v)); }
template <>
inline f16 FromDouble<f16>(double v) { return f16(static_cast<float>(v)); }

}  // namespace rmsnorm::ref

#endif  // RMSNORM_SRC_REF_STORAGE_H_
