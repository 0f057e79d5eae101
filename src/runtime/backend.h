// Which implementation the C ABI dispatches to: the SIMD kernels (src/cpu) or the reference (src/ref).
#ifndef RMSNORM_SRC_RUNTIME_BACKEND_H_
#define RMSNORM_SRC_RUNTIME_BACKEND_H_

#include "rmsnorm/rmsnorm.h"

namespace rmsnorm::runtime {

rmsnorm_backend GetBackend();
void SetBackend(rmsnorm_backend backend);

}  // namespace rmsnorm::runtime

#endif  // RMSNORM_SRC_RUNTIME_BACKEND_H_
