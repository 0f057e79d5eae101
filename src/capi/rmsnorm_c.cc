// The C ABI: check every argument, dispatch to the selected backend, and turn any failure into a
// status plus this thread's message. No exception crosses this boundary.
#include <new>
#include <string>

#include "cpu/cpu.h"
#include "ref/norms.h"
#include "rmsnorm/rmsnorm.h"
#include "runtime/backend.h"
#include "runtime/check.h"
#include "runtime/error.h"
#include "runtime/parallel.h"

namespace rmsnorm {
namespace {

using runtime::NormKind;

template <class Body>
rmsnorm_status Guard(const char* fn, const Body& body) {
  try {
    body();
    return RMSNORM_OK;
  } catch (const runtime::Failure& e) {
    runtime::SetLastError(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    runtime::SetLastError(std::string(fn) + ": out of memory");
    return RMSNORM_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    runtime::SetLastError(std::string(fn) + ": internal error: " + e.what());
    return RMSNORM_ERROR_INTERNAL;
  } catch (...) {
    runtime::SetLastError(std::string(fn) + ": internal error");
    return RMSNORM_ERROR_INTERNAL;
  }
}

bool UseReference() { return runtime::GetBackend() == RMSNORM_BACKEND_REFERENCE; }

rmsnorm_status Forward(const char* fn, const rmsnorm_config* config, NormKind kind, const ForwardArgs& args,
                       bool fused_add = false) {
  return Guard(fn, [&] {
    const Problem p = runtime::CheckConfig(fn, config, kind);
    if (p.rows == 0) return;
    runtime::CheckForward(fn, p, args, kind, fused_add);
    if (kind == NormKind::kLayer) {
      UseReference() ? ref::LayerNormForward(p, args) : cpu::LayerNormForward(p, args);
    } else {
      UseReference() ? ref::RmsForward(p, args) : cpu::RmsForward(p, args);
    }
  });
}

rmsnorm_status Backward(const char* fn, const rmsnorm_config* config, NormKind kind, const BackwardArgs& args) {
  return Guard(fn, [&] {
    const Problem p = runtime::CheckConfig(fn, config, kind);
    if (p.rows == 0) return;
    runtime::CheckBackward(fn, p, args, kind);
    if (kind == NormKind::kLayer) {
      UseReference() ? ref::LayerNormBackward(p, args) : cpu::LayerNormBackward(p, args);
    } else {
      UseReference() ? ref::RmsBackward(p, args) : cpu::RmsBackward(p, args);
    }
  });
}

ForwardArgs MakeForward(const void* x, const float* weight, const float* bias, void* y, float* rstd) {
  ForwardArgs a;
  a.x = x;
  a.weight = weight;
  a.bias = bias;
  a.y = y;
  a.rstd = rstd;
  return a;
}

BackwardArgs MakeBackward(const void* dy, const void* x, const float* weight, const float* rstd, void* dx,
                          float* dweight, float* dbias) {
  BackwardArgs a;
  a.dy = dy;
  a.x = x;
  a.weight = weight;
  a.rstd = rstd;
  a.dx = dx;
  a.dweight = dweight;
  a.dbias = dbias;
  return a;
}

}  // namespace
}  // namespace rmsnorm

using rmsnorm::runtime::NormKind;

extern "C" {

RMSNORM_API rmsnorm_config rmsnorm_config_init(int64_t rows, int64_t cols) {
  rmsnorm_config c;
  c.rows = rows;
  c.cols = cols;
  c.dtype = RMSNORM_F32;
  c.eps = 1e-6f;
  c.partial = 1.0f;
  c.weight_offset = 0.0f;
  return c;
}

RMSNORM_API rmsnorm_status rmsnorm_forward(const rmsnorm_config* config, const void* x, const float* weight,
                                           const float* bias, void* y, float* rstd) {
  return rmsnorm::Forward("rmsnorm_forward", config, NormKind::kRms, rmsnorm::MakeForward(x, weight, bias, y, rstd));
}

RMSNORM_API rmsnorm_status rmsnorm_add_forward(const rmsnorm_config* config, const void* x,
                                               const void* residual, const float* weight, const float* bias,
                                               void* y, void* residual_out, float* rstd) {
  rmsnorm::ForwardArgs a = rmsnorm::MakeForward(x, weight, bias, y, rstd);
  a.residual = residual;
  a.residual_out = residual_out;
  return rmsnorm::Forward("rmsnorm_add_forward", config, NormKind::kRms, a, /*fused_add=*/true);
}

RMSNORM_API rmsnorm_status rmsnorm_backward(const rmsnorm_config* config, const void* dy, const void* x,
                                            const float* weight, const float* rstd, void* dx, float* dweight,
                                            float* dbias) {
  return rmsnorm::Backward("rmsnorm_backward", config, NormKind::kRms,
                           rmsnorm::MakeBackward(dy, x, weight, rstd, dx, dweight, dbias));
}

RMSNORM_API rmsnorm_status rmsnorm_layernorm_forward(const rmsnorm_config* config, const void* x,
                                                     const float* weight, const float* bias, void* y,
                                                     float* mean, float* rstd) {
  rmsnorm::ForwardArgs a = rmsnorm::MakeForward(x, weight, bias, y, rstd);
  a.mean = mean;
  return rmsnorm::Forward("rmsnorm_layernorm_forward", config, NormKind::kLayer, a);
}

RMSNORM_API rmsnorm_status rmsnorm_layernorm_backward(const rmsnorm_config* config, const void* dy,
                                                      const void* x, const float* weight, const float* mean,
                                                      const float* rstd, void* dx, float* dweight,
                                                      float* dbias) {
  rmsnorm::BackwardArgs a = rmsnorm::MakeBackward(dy, x, weight, rstd, dx, dweight, dbias);
  a.mean = mean;
  return rmsnorm::Backward("rmsnorm_layernorm_backward", config, NormKind::kLayer, a);
}

RMSNORM_API rmsnorm_status rmsnorm_l2norm_forward(const rmsnorm_config* config, const void* x,
                                                  const float* weight, const float* bias, void* y, float* rstd) {
  return rmsnorm::Forward("rmsnorm_l2norm_forward", config, NormKind::kL2,
                          rmsnorm::MakeForward(x, weight, bias, y, rstd));
}

RMSNORM_API rmsnorm_status rmsnorm_l2norm_backward(const rmsnorm_config* config, const void* dy, const void* x,
                                                   const float* weight, const float* rstd, void* dx,
                                                   float* dweight, float* dbias) {
  return rmsnorm::Backward("rmsnorm_l2norm_backward", config, NormKind::kL2,
                           rmsnorm::MakeBackward(dy, x, weight, rstd, dx, dweight, dbias));
}

RMSNORM_API void rmsnorm_set_num_threads(int n) { rmsnorm::runtime::SetNumThreads(n); }
RMSNORM_API int rmsnorm_get_num_threads(void) { return rmsnorm::runtime::NumThreads(); }
RMSNORM_API const char* rmsnorm_last_error(void) { return rmsnorm::runtime::LastError(); }

RMSNORM_API int64_t rmsnorm_partial_size(int64_t cols, float partial) {
  int64_t k = -1;
  const rmsnorm_status status = rmsnorm::Guard("rmsnorm_partial_size", [&] {
    rmsnorm_config c = rmsnorm_config_init(0, cols);
    c.partial = partial;
    k = rmsnorm::runtime::CheckConfig("rmsnorm_partial_size", &c, NormKind::kRms).k;
  });
  return status == RMSNORM_OK ? k : -1;
}

RMSNORM_API rmsnorm_status rmsnorm_set_backend(rmsnorm_backend backend) {
  return rmsnorm::Guard("rmsnorm_set_backend", [&] {
    const int raw = rmsnorm::runtime::RawEnum(backend);
    if (raw != RMSNORM_BACKEND_AUTO && raw != RMSNORM_BACKEND_REFERENCE)
      rmsnorm::runtime::FailInvalid("rmsnorm_set_backend: backend is not an rmsnorm_backend (got " +
                                    std::to_string(raw) + ")");
    rmsnorm::runtime::SetBackend(backend);
  });
}

RMSNORM_API rmsnorm_backend rmsnorm_get_backend(void) { return rmsnorm::runtime::GetBackend(); }

RMSNORM_API const char* rmsnorm_cpu_target(void) { return rmsnorm::cpu::TargetName(); }

RMSNORM_API rmsnorm_status rmsnorm_set_cpu_target(const char* name) {
  return rmsnorm::Guard("rmsnorm_set_cpu_target", [&] {
    std::string error;
    if (!rmsnorm::cpu::SetTarget(name, &error)) rmsnorm::runtime::FailInvalid("rmsnorm_set_cpu_target: " + error);
  });
}

#define RMSNORM_STRINGIFY_(x) #x
#define RMSNORM_STRINGIFY(x) RMSNORM_STRINGIFY_(x)
RMSNORM_API const char* rmsnorm_version(void) {
  return RMSNORM_STRINGIFY(RMSNORM_VERSION_MAJOR) "." RMSNORM_STRINGIFY(RMSNORM_VERSION_MINOR) "." RMSNORM_STRINGIFY(
      RMSNORM_VERSION_PATCH);
}

}  // extern "C"
