// Scalar conversions between the storage types and double, for the reference: any storage type of the
// registry (through its C++ type's conversions to and from float), and double itself for gradient
// checks.
#ifndef RMSNORM_SRC_REF_STORAGE_H_
#define RMSNORM_SRC_REF_STORAGE_H_

#include "registry/registry.h"

namespace rmsnorm::ref {

inline double ToDouble(double v) { return v; }
template <class T>
double ToDouble(T v) {
  return registry::ToFloat(v);
}

// A storage type rounds through f32, as the kernels do (f32 result, then one rounding to storage).
template <class T>
T FromDouble(double v) {
  return registry::FromFloat<T>(static_cast<float>(v));
}
template <>
inline double FromDouble<double>(double v) {
  return v;
}

}  // namespace rmsnorm::ref

#endif  // RMSNORM_SRC_REF_STORAGE_H_
