// The C ABI: check every argument, dispatch to the selected backend, and turn any failure into a
// status plus this thread's message. No exception crosses this boundary.
#include <new>
#include <type_traits>
#include <string>

#include "cpu/cpu.h"
#include "ref/norms.h"
#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"
#include "runtime/backend.h"
#include "runtime/check.h"
#include "runtime/error.h"
#include "runtime/parallel.h"
#include "runtime/scratch.h"

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

// Op kOp's C argument that is tensor kTensor, or null when the op does not take it. Picked at compile
// time: a decode row's call is short enough that filling a table of every tensor first (zeroed with
// `rep stos`) was a sixth of it.
template <registry::Op kOp, registry::Tensor kTensor, class Pointer>
Pointer Argument(const void* const* ordered) {
  constexpr int i = registry::Info(kOp).ParameterIndex(kTensor);
  if constexpr (i < 0) {
    return nullptr;
  } else {
    return static_cast<Pointer>(const_cast<void*>(ordered[i]));
  }
}

template <registry::Op kOp>
ForwardArgs ForwardArgsOf(const void* const* ordered) {
  ForwardArgs a;
  a.x = Argument<kOp, registry::kX, const void*>(ordered);
  a.residual = Argument<kOp, registry::kResidual, const void*>(ordered);
  a.weight = Argument<kOp, registry::kWeight, const float*>(ordered);
  a.bias = Argument<kOp, registry::kBias, const float*>(ordered);
  a.y = Argument<kOp, registry::kY, void*>(ordered);
  a.residual_out = Argument<kOp, registry::kResidualOut, void*>(ordered);
  a.mean = Argument<kOp, registry::kMean, float*>(ordered);
  a.rstd = Argument<kOp, registry::kRstd, float*>(ordered);
  return a;
}

template <registry::Op kOp>
BackwardArgs BackwardArgsOf(const void* const* ordered) {
  BackwardArgs a;
  a.dy = Argument<kOp, registry::kDy, const void*>(ordered);
  a.x = Argument<kOp, registry::kX, const void*>(ordered);
  a.weight = Argument<kOp, registry::kWeight, const float*>(ordered);
  a.mean = Argument<kOp, registry::kMean, const float*>(ordered);
  a.rstd = Argument<kOp, registry::kRstd, const float*>(ordered);
  a.dx = Argument<kOp, registry::kDx, void*>(ordered);
  a.dweight = Argument<kOp, registry::kDweight, float*>(ordered);
  a.dbias = Argument<kOp, registry::kDbias, float*>(ordered);
  return a;
}

// The backend's implementation of a checked call: LayerNorm or the RMSNorm family (which covers
// pRMSNorm and L2-Norm through the Problem's k and divisor, and the fused add through args.residual).
template <registry::Op kOp>
void Dispatch(const Problem& p, const void* const* ordered) {
  constexpr const registry::OpInfo& op = registry::Info(kOp);
  constexpr bool kLayer = op.kind == NormKind::kLayer;
  const bool ref = UseReference();
  if constexpr (op.direction == registry::Direction::kForward) {
    const ForwardArgs a = ForwardArgsOf<kOp>(ordered);
    if constexpr (kLayer) return ref ? ref::LayerNormForward(p, a) : cpu::LayerNormForward(p, a);
    return ref ? ref::RmsForward(p, a) : cpu::RmsForward(p, a);
  } else {
    const BackwardArgs a = BackwardArgsOf<kOp>(ordered);
    if constexpr (kLayer) return ref ? ref::LayerNormBackward(p, a) : cpu::LayerNormBackward(p, a);
    return ref ? ref::RmsBackward(p, a) : cpu::RmsBackward(p, a);
  }
}

// Every operation of the C ABI: the pointers in the C parameter order of registry/ops.inc. Checks the
// config and every tensor before anything is written.
// The same from an extended config (strided rows), under the _ex function's name.
template <registry::Op kOp, class Config, class... Pointers>
rmsnorm_status Run(const Config* config, Pointers... pointers) {
  constexpr const registry::OpInfo& op = registry::Info(kOp);
  static_assert(sizeof...(Pointers) == op.num_tensors, "the C function's tensors, as registry/ops.inc lists them");
  constexpr bool kEx = std::is_same_v<Config, rmsnorm_config_ex>;
  constexpr const char* fn = kEx ? op.c_function_ex : op.c_function;
  const void* const ordered[] = {pointers...};
  return Guard(fn, [&] {
    // Initialized from the check's result, not assigned: a Problem is some 300 bytes, and zeroing it
    // and then copying it over was a fair part of a decode row's call.
    const Problem p = [&] {
      if constexpr (kEx) {
        return runtime::CheckConfigEx(fn, config, op.kind);
      } else {
        return runtime::CheckConfig(fn, config, op.kind);
      }
    }();
    if (p.rows == 0) return;
    runtime::CheckTensors<kOp>(fn, p, ordered);
    Dispatch<kOp>(p, ordered);
  });
}

// A quantized forward (registry::QuantInfo(kBase)): the format, the extended config with q's strides
// in config->y, then every tensor, all checked before anything is written.
template <registry::Op kBase, class... Pointers>
rmsnorm_status RunQuantized(const rmsnorm_config_ex* config, rmsnorm_quant_format format, Pointers... pointers) {
  constexpr const registry::QuantOpInfo& op = registry::QuantInfo(kBase);
  static_assert(sizeof...(Pointers) == op.num_tensors, "the C function's tensors, as registry::kQuantOps lists them");
  constexpr const char* fn = op.c_function;
  const void* const ordered[] = {pointers...};
  return Guard(fn, [&] {
    const int raw = runtime::RawEnum(format);
    const registry::QuantFormatInfo* info = registry::FindQuantFormat(raw);
    if (info == nullptr)
      runtime::FailInvalid(std::string(fn) + ": format is not an rmsnorm_quant_format (got " + std::to_string(raw) + ")");
    const Problem p = runtime::CheckConfigEx(fn, config, NormKind::kRms, info);
    if (p.rows == 0) return;
    runtime::CheckQuantizedTensors<kBase>(fn, p, *info, ordered);
    const auto at = [&](registry::Tensor t) {
      const int i = op.ParameterIndex(t);
      return i < 0 ? nullptr : const_cast<void*>(ordered[i]);
    };
    ForwardArgs a;
    a.x = at(registry::kX);
    a.residual = at(registry::kResidual);
    a.weight = static_cast<const float*>(at(registry::kWeight));
    a.bias = static_cast<const float*>(at(registry::kBias));
    a.residual_out = at(registry::kResidualOut);
    a.rstd = static_cast<float*>(at(registry::kRstd));
    QuantizedOutput out;
    out.format = info;
    out.q = at(registry::kQ);
    out.scales = static_cast<float*>(at(registry::kScales));
    if (UseReference()) return ref::RmsForwardQuantized(p, a, out);
    cpu::RmsForwardQuantized(p, a, out);
  });
}

}  // namespace
}  // namespace rmsnorm

using rmsnorm::runtime::NormKind;
using rmsnorm::registry::Op;

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
  return rmsnorm::Run<Op::kRmsForward>(config, x, weight, bias, y, rstd);
}

RMSNORM_API rmsnorm_status rmsnorm_add_forward(const rmsnorm_config* config, const void* x,
                                               const void* residual, const float* weight, const float* bias,
                                               void* y, void* residual_out, float* rstd) {
  return rmsnorm::Run<Op::kRmsAddForward>(config, x, residual, weight, bias, y, residual_out, rstd);
}

RMSNORM_API rmsnorm_status rmsnorm_backward(const rmsnorm_config* config, const void* dy, const void* x,
                                            const float* weight, const float* rstd, void* dx, float* dweight,
                                            float* dbias) {
  return rmsnorm::Run<Op::kRmsBackward>(config, dy, x, weight, rstd, dx, dweight, dbias);
}

RMSNORM_API rmsnorm_status rmsnorm_layernorm_forward(const rmsnorm_config* config, const void* x,
                                                     const float* weight, const float* bias, void* y,
                                                     float* mean, float* rstd) {
  return rmsnorm::Run<Op::kLayerForward>(config, x, weight, bias, y, mean, rstd);
}

RMSNORM_API rmsnorm_status rmsnorm_layernorm_backward(const rmsnorm_config* config, const void* dy,
                                                      const void* x, const float* weight, const float* mean,
                                                      const float* rstd, void* dx, float* dweight,
                                                      float* dbias) {
  return rmsnorm::Run<Op::kLayerBackward>(config, dy, x, weight, mean, rstd, dx, dweight, dbias);
}

RMSNORM_API rmsnorm_status rmsnorm_l2norm_forward(const rmsnorm_config* config, const void* x,
                                                  const float* weight, const float* bias, void* y, float* rstd) {
  return rmsnorm::Run<Op::kL2Forward>(config, x, weight, bias, y, rstd);
}

RMSNORM_API rmsnorm_status rmsnorm_l2norm_backward(const rmsnorm_config* config, const void* dy, const void* x,
                                                   const float* weight, const float* rstd, void* dx,
                                                   float* dweight, float* dbias) {
  return rmsnorm::Run<Op::kL2Backward>(config, dy, x, weight, rstd, dx, dweight, dbias);
}

RMSNORM_API rmsnorm_status rmsnorm_forward_ex(const rmsnorm_config_ex* config, const void* x, const float* weight,
                                              const float* bias, void* y, float* rstd) {
  return rmsnorm::Run<Op::kRmsForward>(config, x, weight, bias, y, rstd);
}

RMSNORM_API rmsnorm_status rmsnorm_add_forward_ex(const rmsnorm_config_ex* config, const void* x,
                                                  const void* residual, const float* weight, const float* bias,
                                                  void* y, void* residual_out, float* rstd) {
  return rmsnorm::Run<Op::kRmsAddForward>(config, x, residual, weight, bias, y, residual_out, rstd);
}

RMSNORM_API rmsnorm_status rmsnorm_backward_ex(const rmsnorm_config_ex* config, const void* dy, const void* x,
                                               const float* weight, const float* rstd, void* dx, float* dweight,
                                               float* dbias) {
  return rmsnorm::Run<Op::kRmsBackward>(config, dy, x, weight, rstd, dx, dweight, dbias);
}

RMSNORM_API rmsnorm_status rmsnorm_layernorm_forward_ex(const rmsnorm_config_ex* config, const void* x,
                                                        const float* weight, const float* bias, void* y,
                                                        float* mean, float* rstd) {
  return rmsnorm::Run<Op::kLayerForward>(config, x, weight, bias, y, mean, rstd);
}

RMSNORM_API rmsnorm_status rmsnorm_layernorm_backward_ex(const rmsnorm_config_ex* config, const void* dy,
                                                         const void* x, const float* weight, const float* mean,
                                                         const float* rstd, void* dx, float* dweight,
                                                         float* dbias) {
  return rmsnorm::Run<Op::kLayerBackward>(config, dy, x, weight, mean, rstd, dx, dweight, dbias);
}

RMSNORM_API rmsnorm_status rmsnorm_l2norm_forward_ex(const rmsnorm_config_ex* config, const void* x,
                                                     const float* weight, const float* bias, void* y, float* rstd) {
  return rmsnorm::Run<Op::kL2Forward>(config, x, weight, bias, y, rstd);
}

RMSNORM_API rmsnorm_status rmsnorm_l2norm_backward_ex(const rmsnorm_config_ex* config, const void* dy,
                                                      const void* x, const float* weight, const float* rstd,
                                                      void* dx, float* dweight, float* dbias) {
  return rmsnorm::Run<Op::kL2Backward>(config, dy, x, weight, rstd, dx, dweight, dbias);
}

RMSNORM_API rmsnorm_status rmsnorm_forward_quantized(const rmsnorm_config_ex* config, rmsnorm_quant_format format,
                                                     const void* x, const float* weight, const float* bias, void* q,
                                                     float* scales, float* rstd) {
  return rmsnorm::RunQuantized<Op::kRmsForward>(config, format, x, weight, bias, q, scales, rstd);
}

RMSNORM_API rmsnorm_status rmsnorm_add_forward_quantized(const rmsnorm_config_ex* config, rmsnorm_quant_format format,
                                                         const void* x, const void* residual, const float* weight,
                                                         const float* bias, void* q, float* scales, void* residual_out,
                                                         float* rstd) {
  return rmsnorm::RunQuantized<Op::kRmsAddForward>(config, format, x, residual, weight, bias, q, scales,
                                                   residual_out, rstd);
}

RMSNORM_API void rmsnorm_set_num_threads(int n) { rmsnorm::runtime::SetNumThreads(n); }
RMSNORM_API int rmsnorm_get_num_threads(void) { return rmsnorm::runtime::NumThreads(); }
RMSNORM_API const char* rmsnorm_last_error(void) { return rmsnorm::runtime::LastError(); }

RMSNORM_API rmsnorm_status rmsnorm_set_scratch_limit(int64_t bytes) {
  return rmsnorm::Guard("rmsnorm_set_scratch_limit", [&] {
    if (bytes < 0)
      rmsnorm::runtime::FailInvalid("rmsnorm_set_scratch_limit: bytes must be >= 0 (got " + std::to_string(bytes) + ")");
    rmsnorm::runtime::SetScratchLimit(bytes);
  });
}
RMSNORM_API int64_t rmsnorm_get_scratch_limit(void) { return rmsnorm::runtime::ScratchLimit(); }
RMSNORM_API void rmsnorm_release_thread_scratch(void) { rmsnorm::runtime::ReleaseThreadScratch(); }

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
