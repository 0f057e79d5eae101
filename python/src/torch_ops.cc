// The eager autograd ops for torch, in C++: torch.ops.rmsnorm_eager.rms_norm and .layer_norm.
//
// rmsnorm.torch's eager route calls these, through the CPython entry points at the bottom (the module
// rmsnorm._torch_ops), when the wheel was built against the torch it runs with (python/CMakeLists.txt).
// A torch.autograd.Function in Python costs a few microseconds a call in the forward and again in the
// backward, more than the kernel on a decode row; a C++ autograd node costs what ATen's own
// F.layer_norm pays. Same kernels and arguments as the Python route (rmsnorm/torch/
// _ops.py), so the same bits.
//
//   x: (*, cols) contiguous f32/bf16/f16; weight, bias: (cols) any of those dtypes (used as f32), or
//   undefined; y: x's shape and dtype. Gradients: dx like x, dweight and dbias in their parameter's dtype.
#include <Python.h>

#include <ATen/ATen.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/library.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rmsnorm/rmsnorm.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

rmsnorm_dtype DtypeOf(const at::Tensor& x) {
  switch (x.scalar_type()) {
    case at::kFloat: return RMSNORM_F32;
    case at::kBFloat16: return RMSNORM_BF16;
    case at::kHalf: return RMSNORM_F16;
    default: TORCH_CHECK(false, "rmsnorm: x must be float32, bfloat16 or float16, got ", x.scalar_type());
  }
}

rmsnorm_config ConfigOf(const at::Tensor& x, double eps, double partial, double weight_offset) {
  const int64_t cols = x.size(-1);
  rmsnorm_config c = rmsnorm_config_init(cols ? x.numel() / cols : 0, cols);
  c.dtype = DtypeOf(x);
  c.eps = static_cast<float>(eps);
  c.partial = static_cast<float>(partial);
  c.weight_offset = static_cast<float>(weight_offset);
  return c;
}

void Check(rmsnorm_status status) { TORCH_CHECK(status == RMSNORM_OK, "rmsnorm: ", rmsnorm_last_error()); }

// A parameter as the kernels read it: f32 and contiguous (the tensor itself when it already is).
at::Tensor AsF32(const at::Tensor& p) { return p.defined() ? p.to(at::kFloat).contiguous() : p; }

const float* FloatPointer(const at::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }
float* MutableFloatPointer(at::Tensor& t) { return t.defined() ? t.data_ptr<float>() : nullptr; }

at::Tensor RowStatistic(const at::Tensor& x) {
  return at::empty(x.sizes().slice(0, x.dim() - 1), x.options().dtype(at::kFloat));
}

// dweight or dbias, which the kernel overwrites with the sum over rows (and leaves alone for no rows).
at::Tensor ParamGradBuffer(const rmsnorm_config& c, bool wanted, const at::Tensor& x) {
  if (!wanted) return {};
  const auto options = x.options().dtype(at::kFloat);
  return c.rows ? at::empty({c.cols}, options) : at::zeros({c.cols}, options);
}

// An absent parameter as an undefined tensor.
at::Tensor Defined(const std::optional<at::Tensor>& p) { return p.has_value() ? *p : at::Tensor(); }

at::Tensor InDtype(const at::Tensor& grad, at::ScalarType dtype) {
  return grad.defined() && grad.scalar_type() != dtype ? grad.to(dtype) : grad;
}

// As Python's once_differentiable: under create_graph the gradients come back attached to a node that
// raises if they are differentiated again, rather than silently cut off from the graph.
variable_list OnceDifferentiable(variable_list grads) {
  if (!at::GradMode::is_enabled()) return grads;
  variable_list inputs;
  for (const at::Tensor& g : grads) inputs.push_back(g.defined() ? g.detach().requires_grad_(true) : g);
  auto error = std::make_shared<torch::autograd::DelayedError>(
      "rmsnorm: the norms' backward is not differentiable (no double backward)", static_cast<int64_t>(inputs.size()));
  return (*error)(std::move(inputs));
}

// LayerNorm's statistics, saved for the backward.
struct LayerStats {
  at::Tensor mean, rstd;
};

at::Tensor RmsForward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                      double partial, double weight_offset, at::Tensor* rstd) {
  const rmsnorm_config c = ConfigOf(x, eps, partial, weight_offset);
  const at::Tensor w = AsF32(weight), b = AsF32(bias);
  at::Tensor y = at::empty_like(x);
  if (rstd) *rstd = RowStatistic(x);
  Check(rmsnorm_forward(&c, x.data_ptr(), FloatPointer(w), FloatPointer(b), y.data_ptr(),
                        rstd ? rstd->data_ptr<float>() : nullptr));
  return y;
}

at::Tensor LayerForward(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias, double eps,
                        LayerStats* saved) {
  const rmsnorm_config c = ConfigOf(x, eps, 1.0, 0.0);
  const at::Tensor w = AsF32(weight), b = AsF32(bias);
  at::Tensor y = at::empty_like(x);
  if (saved) saved->mean = RowStatistic(x), saved->rstd = RowStatistic(x);
  Check(rmsnorm_layernorm_forward(&c, x.data_ptr(), FloatPointer(w), FloatPointer(b), y.data_ptr(),
                                  saved ? saved->mean.data_ptr<float>() : nullptr,
                                  saved ? saved->rstd.data_ptr<float>() : nullptr));
  return y;
}

// ctx->saved_data keys.
constexpr const char* kConfig = "config";       // (eps, partial, weight_offset)
constexpr const char* kDtypes = "param_dtypes";  // (weight's, bias's) as ints, -1 when absent

std::vector<int64_t> ParamDtypes(const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias) {
  const auto code = [](const std::optional<at::Tensor>& p) {
    return p.has_value() && p->defined() ? static_cast<int64_t>(p->scalar_type()) : int64_t{-1};
  };
  return {code(weight), code(bias)};
}

// Which of (x, weight, bias) want a gradient. The node's edges are its tensor inputs only, so an absent
// weight shifts the bias's index.
std::array<bool, 3> NeedsGrad(AutogradContext* ctx) {
  const auto dtypes = ctx->saved_data[kDtypes].toIntVector();
  const bool weight = dtypes[0] >= 0, bias = dtypes[1] >= 0;
  return {ctx->needs_input_grad(0), weight && ctx->needs_input_grad(1), bias && ctx->needs_input_grad(1 + weight)};
}

// The gradients of (x, weight, bias) from the backward kernel's dx, dweight and dbias, in the inputs'
// dtypes, then undefined for the scalar arguments.
variable_list Gradients(AutogradContext* ctx, const std::array<bool, 3>& needed, at::Tensor dx,
                        const at::Tensor& dweight, const at::Tensor& dbias, size_t scalars) {
  const auto dtypes = ctx->saved_data[kDtypes].toIntVector();
  variable_list grads = {needed[0] ? dx : at::Tensor(),
                         needed[1] ? InDtype(dweight, static_cast<at::ScalarType>(dtypes[0])) : at::Tensor(),
                         needed[2] ? InDtype(dbias, static_cast<at::ScalarType>(dtypes[1])) : at::Tensor()};
  grads = OnceDifferentiable(std::move(grads));
  grads.resize(3 + scalars);
  return grads;
}

struct RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, double eps, double partial, double weight_offset) {
    at::Tensor rstd;
    const at::Tensor w = AsF32(Defined(weight));  // once, for the kernel and the backward
    at::Tensor y = RmsForward(x, w, Defined(bias), eps, partial, weight_offset, &rstd);
    ctx->save_for_backward({x, w, rstd});
    ctx->saved_data[kConfig] = std::vector<double>{eps, partial, weight_offset};
    ctx->saved_data[kDtypes] = ParamDtypes(weight, bias);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &rstd = saved[2];
    const auto config = ctx->saved_data[kConfig].toDoubleVector();
    const rmsnorm_config c = ConfigOf(x, config[0], config[1], config[2]);
    const at::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous();
    const std::array<bool, 3> needed = NeedsGrad(ctx);
    at::Tensor dx = at::empty_like(x);
    at::Tensor dweight = ParamGradBuffer(c, needed[1], x), dbias = ParamGradBuffer(c, needed[2], x);
    Check(rmsnorm_backward(&c, dy.data_ptr(), x.data_ptr(), FloatPointer(w), rstd.data_ptr<float>(), dx.data_ptr(),
                           MutableFloatPointer(dweight), MutableFloatPointer(dbias)));
    return Gradients(ctx, needed, dx, dweight, dbias, 3);
  }
};

struct LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const std::optional<at::Tensor>& weight,
                            const std::optional<at::Tensor>& bias, double eps) {
    LayerStats stats;
    const at::Tensor w = AsF32(Defined(weight));  // once, for the kernel and the backward
    at::Tensor y = LayerForward(x, w, Defined(bias), eps, &stats);
    ctx->save_for_backward({x, w, stats.mean, stats.rstd});
    ctx->saved_data[kConfig] = std::vector<double>{eps, 1.0, 0.0};
    ctx->saved_data[kDtypes] = ParamDtypes(weight, bias);
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const rmsnorm_config c = ConfigOf(x, ctx->saved_data[kConfig].toDoubleVector()[0], 1.0, 0.0);
    const at::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous();
    const std::array<bool, 3> needed = NeedsGrad(ctx);
    at::Tensor dx = at::empty_like(x);
    at::Tensor dweight = ParamGradBuffer(c, needed[1], x), dbias = ParamGradBuffer(c, needed[2], x);
    Check(rmsnorm_layernorm_backward(&c, dy.data_ptr(), x.data_ptr(), FloatPointer(w), mean.data_ptr<float>(),
                                     rstd.data_ptr<float>(), dx.data_ptr(), MutableFloatPointer(dweight),
                                     MutableFloatPointer(dbias)));
    return Gradients(ctx, needed, dx, dweight, dbias, 1);
  }
};

at::Tensor RmsNormAutograd(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                           const std::optional<at::Tensor>& bias, double eps, double partial, double weight_offset) {
  return RmsNormFunction::apply(x.contiguous(), weight, bias, eps, partial, weight_offset);
}

at::Tensor RmsNormCpu(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                      const std::optional<at::Tensor>& bias, double eps, double partial, double weight_offset) {
  return RmsForward(x.contiguous(), Defined(weight), Defined(bias), eps, partial, weight_offset, nullptr);
}

at::Tensor LayerNormAutograd(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                             const std::optional<at::Tensor>& bias, double eps) {
  return LayerNormFunction::apply(x.contiguous(), weight, bias, eps);
}

at::Tensor LayerNormCpu(const at::Tensor& x, const std::optional<at::Tensor>& weight,
                        const std::optional<at::Tensor>& bias, double eps) {
  return LayerForward(x.contiguous(), Defined(weight), Defined(bias), eps, nullptr);
}

}  // namespace

// ---- Direct entry points for rmsnorm.torch's eager route ----------------------------------------
//
// The same functions as a CPython module (rmsnorm._torch_ops), called without the dispatcher. Through
// torch.ops a call pays about 2 us of argument parsing and dispatch, as much as a decode row's whole
// F.layer_norm. rmsnorm/torch/functional.py calls these only where the dispatcher would do nothing but
// reach the same kernel: plain CPU tensors of the kernels' dtypes with matching shapes, no mode, no
// transform, not compiling or tracing (_eager_cols there), Python floats in range. They take exactly
// those arguments, positionally: x, weight or None, bias or None, then the floats.
namespace {

std::optional<at::Tensor> OptionalTensor(PyObject* p) {
  return p == Py_None ? std::nullopt : std::optional<at::Tensor>(THPVariable_Unpack(p));
}

// Lets other Python threads run during a call that moves more than a decode row; a small call keeps
// the GIL, whose release and reacquisition would cost more than the kernel.
class ReleaseGilIfLarge {
 public:
  explicit ReleaseGilIfLarge(const at::Tensor& x)
      : state_(x.numel() >= (int64_t{1} << 16) ? PyEval_SaveThread() : nullptr) {}
  ~ReleaseGilIfLarge() {
    if (state_) PyEval_RestoreThread(state_);
  }
  ReleaseGilIfLarge(const ReleaseGilIfLarge&) = delete;
  ReleaseGilIfLarge& operator=(const ReleaseGilIfLarge&) = delete;

 private:
  PyThreadState* state_;
};

// forward() run without the GIL when x is large, returned as a new Python reference.
template <class Forward>
PyObject* WrapForward(const at::Tensor& x, const Forward& forward) {
  at::Tensor y;
  {
    const ReleaseGilIfLarge release(x);
    y = forward();
  }
  return THPVariable_Wrap(std::move(y));
}

// rms_norm(x, weight, bias, eps, partial, weight_offset, with_autograd) -> y, or None when x is not
// contiguous (the caller's strided path takes it).
PyObject* PyRmsNorm(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(nargs == 7, "rms_norm takes 7 arguments");
  const at::Tensor& x = THPVariable_Unpack(args[0]);
  if (!x.is_contiguous()) Py_RETURN_NONE;
  const std::optional<at::Tensor> weight = OptionalTensor(args[1]), bias = OptionalTensor(args[2]);
  const double eps = PyFloat_AsDouble(args[3]), partial = PyFloat_AsDouble(args[4]);
  const double weight_offset = PyFloat_AsDouble(args[5]);
  if (PyObject_IsTrue(args[6])) return THPVariable_Wrap(RmsNormAutograd(x, weight, bias, eps, partial, weight_offset));
  return WrapForward(x, [&] { return RmsNormCpu(x, weight, bias, eps, partial, weight_offset); });
  END_HANDLE_TH_ERRORS
}

// layer_norm(x, weight, bias, eps, with_autograd) -> y, or None as above.
PyObject* PyLayerNorm(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(nargs == 5, "layer_norm takes 5 arguments");
  const at::Tensor& x = THPVariable_Unpack(args[0]);
  if (!x.is_contiguous()) Py_RETURN_NONE;
  const std::optional<at::Tensor> weight = OptionalTensor(args[1]), bias = OptionalTensor(args[2]);
  const double eps = PyFloat_AsDouble(args[3]);
  if (PyObject_IsTrue(args[4])) return THPVariable_Wrap(LayerNormAutograd(x, weight, bias, eps));
  return WrapForward(x, [&] { return LayerNormCpu(x, weight, bias, eps); });
  END_HANDLE_TH_ERRORS
}

// add_rms_norm(x, residual, weight, bias, eps, partial, weight_offset) -> (y, h) with h = x + residual
// and y = RMSNorm(h), inference only; None when x or residual is not contiguous. x and residual have one
// shape and dtype (the caller checks).
PyObject* PyAddRmsNorm(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(nargs == 7, "add_rms_norm takes 7 arguments");
  const at::Tensor& x = THPVariable_Unpack(args[0]);
  const at::Tensor& residual = THPVariable_Unpack(args[1]);
  if (!x.is_contiguous() || !residual.is_contiguous()) Py_RETURN_NONE;
  const rmsnorm_config c =
      ConfigOf(x, PyFloat_AsDouble(args[4]), PyFloat_AsDouble(args[5]), PyFloat_AsDouble(args[6]));
  const at::Tensor w = AsF32(Defined(OptionalTensor(args[2]))), b = AsF32(Defined(OptionalTensor(args[3])));
  at::Tensor y = at::empty_like(x), h = at::empty_like(x);
  {
    const ReleaseGilIfLarge release(x);
    Check(rmsnorm_add_forward(&c, x.data_ptr(), residual.data_ptr(), FloatPointer(w), FloatPointer(b), y.data_ptr(),
                              h.data_ptr(), nullptr));
  }
  PyObject* pair = PyTuple_New(2);
  if (pair == nullptr) return nullptr;
  PyTuple_SET_ITEM(pair, 0, THPVariable_Wrap(std::move(y)));  // the tuple takes the references
  PyTuple_SET_ITEM(pair, 1, THPVariable_Wrap(std::move(h)));
  return pair;
  END_HANDLE_TH_ERRORS
}

PyMethodDef kMethods[] = {
    {"rms_norm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(PyRmsNorm)), METH_FASTCALL,
     "rms_norm(x, weight, bias, eps, partial, weight_offset, with_autograd): see torch_ops.cc"},
    {"layer_norm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(PyLayerNorm)), METH_FASTCALL,
     "layer_norm(x, weight, bias, eps, with_autograd): see torch_ops.cc"},
    {"add_rms_norm", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(PyAddRmsNorm)), METH_FASTCALL,
     "add_rms_norm(x, residual, weight, bias, eps, partial, weight_offset): inference, see torch_ops.cc"},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT, "_torch_ops", "rmsnorm's eager torch entry points", -1, kMethods,
                       nullptr, nullptr, nullptr, nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__torch_ops() { return PyModule_Create(&kModule); }

TORCH_LIBRARY(rmsnorm_eager, m) {
  m.def("rms_norm(Tensor x, Tensor? weight, Tensor? bias, float eps, float partial, float weight_offset) -> Tensor");
  m.def("layer_norm(Tensor x, Tensor? weight, Tensor? bias, float eps) -> Tensor");
}

TORCH_LIBRARY_IMPL(rmsnorm_eager, Autograd, m) {
  m.impl("rms_norm", RmsNormAutograd);
  m.impl("layer_norm", LayerNormAutograd);
}

// Below autograd (no_grad inside the autograd kernel, inference_mode directly).
TORCH_LIBRARY_IMPL(rmsnorm_eager, CPU, m) {
  m.impl("rms_norm", RmsNormCpu);
  m.impl("layer_norm", LayerNormCpu);
}
