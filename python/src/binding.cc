// rmsnorm._C: the C ABI of rmsnorm.h, one Python function per C function.
//
// Each tensor argument is one of
//   - None, for the C ABI's NULL;
//   - an object with the buffer protocol (a C-contiguous NumPy array, of any dtype including ml_dtypes'
//     bfloat16): its size in bytes must be exactly what the config implies, so a mismatch is a ValueError
//     rather than an overrun, and outputs must be writable;
//   - an int, the address of memory the caller vouches for (torch's data_ptr(); torch tensors have no
//     buffer protocol). rmsnorm.torch checks shapes, dtypes and devices before it passes one.
// This keeps a call at well under a microsecond of overhead. The checks that need to know the array
// type (dtype, device, overlap) live in the Python layer, the only caller; the library checks the rest
// (sizes, eps, partial, NULL where required) and reports a status, which becomes a Python exception here.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <new>
#include <string>

#include "rmsnorm/rmsnorm.h"

namespace nb = nanobind;

namespace {

// One tensor argument (see the top of the file). Holds the buffer, if any, until the call returns.
class Operand {
 public:
  Operand(const char* name, nb::handle h, int64_t count, int64_t elem_bytes, bool writable) {
    if (h.is_none()) return;
    if (PyLong_Check(h.ptr())) {
      address_ = reinterpret_cast<void*>(nb::cast<uintptr_t>(h));
      return;
    }
    if (PyObject_GetBuffer(h.ptr(), &view_, writable ? PyBUF_WRITABLE : PyBUF_SIMPLE) != 0) {
      PyErr_Clear();
      throw nb::value_error((std::string("rmsnorm: ") + name + " must be a C-contiguous" +
                             (writable ? ", writable" : "") + " buffer, an address, or None")
                                .c_str());
    }
    held_ = true;
    address_ = view_.buf;
    int64_t bytes = 0;
    if (count < 0 || __builtin_mul_overflow(count, elem_bytes, &bytes))
      throw nb::value_error("rmsnorm: rows and cols must be >= 0 and rows * cols must fit in int64");
    if (view_.len != bytes)
      throw nb::value_error((std::string("rmsnorm: ") + name + " holds " + std::to_string(view_.len) +
                             " bytes, expected " + std::to_string(count) + " elements of " +
                             std::to_string(elem_bytes) + " bytes")
                                .c_str());
  }
  ~Operand() {
    if (held_) PyBuffer_Release(&view_);
  }
  Operand(const Operand&) = delete;
  Operand& operator=(const Operand&) = delete;
  template <class T>
  T* as() const {
    return static_cast<T*>(address_);
  }

 private:
  Py_buffer view_{};
  bool held_ = false;
  void* address_ = nullptr;
};

// Sizes of the operands a config implies. A negative or overflowing size becomes -1, which no buffer
// matches; the library rejects such a config on its own when only addresses are given.
struct Sizes {
  int64_t matrix, rows, cols, elem;
  explicit Sizes(const rmsnorm_config& c) : rows(c.rows), cols(c.cols), elem(c.dtype == RMSNORM_F32 ? 4 : 2) {
    if (c.rows < 0 || c.cols < 0 || __builtin_mul_overflow(c.rows, c.cols, &matrix)) matrix = -1;
  }
};

// Reads the library's message on the thread that made the call (the message is thread-local), then raises.
[[noreturn]] void raise_status(rmsnorm_status status) {
  const std::string message = rmsnorm_last_error();
  switch (status) {
    case RMSNORM_ERROR_INVALID_ARGUMENT:
      throw nb::value_error(message.c_str());
    case RMSNORM_ERROR_OUT_OF_MEMORY:
      throw std::bad_alloc();  // nanobind turns it into MemoryError
    case RMSNORM_ERROR_UNSUPPORTED:
      PyErr_SetString(PyExc_NotImplementedError, message.c_str());
      throw nb::python_error();
    default:
      PyErr_SetString(PyExc_RuntimeError, ("rmsnorm: internal error: " + message).c_str());
      throw nb::python_error();
  }
}

rmsnorm_config make_config(int64_t rows, int64_t cols, int dtype, float eps, float partial, float weight_offset) {
  // The enum value is checked here because a stray integer is not a valid rmsnorm_dtype in C.
  if (dtype != RMSNORM_F32 && dtype != RMSNORM_BF16 && dtype != RMSNORM_F16)
    throw nb::value_error(("rmsnorm: dtype code must be 0 (f32), 1 (bf16) or 2 (f16), got " +
                           std::to_string(dtype)).c_str());
  rmsnorm_config c = rmsnorm_config_init(rows, cols);
  c.dtype = static_cast<rmsnorm_dtype>(dtype);
  c.eps = eps;
  c.partial = partial;
  c.weight_offset = weight_offset;
  return c;
}

// Kernels run without the GIL so other Python threads (data loaders, DDP's reducer) keep going.
template <class Call>
void run(const Call& call) {
  rmsnorm_status status;
  {
    nb::gil_scoped_release release;
    status = call();
  }
  if (status != RMSNORM_OK) raise_status(status);
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "Low-level binding of the rmsnorm C ABI. Private: use rmsnorm and rmsnorm.torch.";

  m.attr("F32") = static_cast<int>(RMSNORM_F32);
  m.attr("BF16") = static_cast<int>(RMSNORM_BF16);
  m.attr("F16") = static_cast<int>(RMSNORM_F16);
  m.attr("BACKEND_AUTO") = static_cast<int>(RMSNORM_BACKEND_AUTO);
  m.attr("BACKEND_REFERENCE") = static_cast<int>(RMSNORM_BACKEND_REFERENCE);
  m.attr("HEADER_VERSION") = std::to_string(RMSNORM_VERSION_MAJOR) + "." + std::to_string(RMSNORM_VERSION_MINOR) +
                             "." + std::to_string(RMSNORM_VERSION_PATCH);

  using H = nb::handle;
  constexpr bool kIn = false, kOut = true;

  // x, y: (rows, cols) in dtype; weight, bias: (cols) f32 or None; rstd: (rows) f32 or None.
  m.def(
      "rms_forward",
      [](int64_t rows, int64_t cols, int dtype, float eps, float partial, float weight_offset, H x, H weight, H bias,
         H y, H rstd) {
        const rmsnorm_config c = make_config(rows, cols, dtype, eps, partial, weight_offset);
        const Sizes n(c);
        const Operand x_("x", x, n.matrix, n.elem, kIn), w_("weight", weight, n.cols, 4, kIn),
            b_("bias", bias, n.cols, 4, kIn), y_("y", y, n.matrix, n.elem, kOut), r_("rstd", rstd, n.rows, 4, kOut);
        run([&] {
          return rmsnorm_forward(&c, x_.as<const void>(), w_.as<const float>(), b_.as<const float>(), y_.as<void>(),
                                 r_.as<float>());
        });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("partial"),
      nb::arg("weight_offset"), nb::arg("x").none(), nb::arg("weight").none(), nb::arg("bias").none(),
      nb::arg("y").none(), nb::arg("rstd").none());

  // x, residual, y, residual_out: (rows, cols) in dtype; weight, bias: (cols) f32 or None;
  // rstd: (rows) f32 or None.
  m.def(
      "rms_add_forward",
      [](int64_t rows, int64_t cols, int dtype, float eps, float partial, float weight_offset, H x, H residual,
         H weight, H bias, H y, H residual_out, H rstd) {
        const rmsnorm_config c = make_config(rows, cols, dtype, eps, partial, weight_offset);
        const Sizes n(c);
        const Operand x_("x", x, n.matrix, n.elem, kIn), res_("residual", residual, n.matrix, n.elem, kIn),
            w_("weight", weight, n.cols, 4, kIn), b_("bias", bias, n.cols, 4, kIn), y_("y", y, n.matrix, n.elem, kOut),
            ro_("residual_out", residual_out, n.matrix, n.elem, kOut), r_("rstd", rstd, n.rows, 4, kOut);
        run([&] {
          return rmsnorm_add_forward(&c, x_.as<const void>(), res_.as<const void>(), w_.as<const float>(),
                                     b_.as<const float>(), y_.as<void>(), ro_.as<void>(), r_.as<float>());
        });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("partial"),
      nb::arg("weight_offset"), nb::arg("x").none(), nb::arg("residual").none(), nb::arg("weight").none(),
      nb::arg("bias").none(), nb::arg("y").none(), nb::arg("residual_out").none(), nb::arg("rstd").none());

  // dy, x, dx: (rows, cols) in dtype; weight: (cols) f32 or None; rstd: (rows) f32 or None (recompute);
  // dweight, dbias: (cols) f32 or None (skip).
  m.def(
      "rms_backward",
      [](int64_t rows, int64_t cols, int dtype, float eps, float partial, float weight_offset, H dy, H x, H weight,
         H rstd, H dx, H dweight, H dbias) {
        const rmsnorm_config c = make_config(rows, cols, dtype, eps, partial, weight_offset);
        const Sizes n(c);
        const Operand dy_("dy", dy, n.matrix, n.elem, kIn), x_("x", x, n.matrix, n.elem, kIn),
            w_("weight", weight, n.cols, 4, kIn), r_("rstd", rstd, n.rows, 4, kIn),
            dx_("dx", dx, n.matrix, n.elem, kOut), dw_("dweight", dweight, n.cols, 4, kOut),
            db_("dbias", dbias, n.cols, 4, kOut);
        run([&] {
          return rmsnorm_backward(&c, dy_.as<const void>(), x_.as<const void>(), w_.as<const float>(),
                                  r_.as<const float>(), dx_.as<void>(), dw_.as<float>(), db_.as<float>());
        });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("partial"),
      nb::arg("weight_offset"), nb::arg("dy").none(), nb::arg("x").none(), nb::arg("weight").none(),
      nb::arg("rstd").none(), nb::arg("dx").none(), nb::arg("dweight").none(), nb::arg("dbias").none());

  // As rms_forward, plus mean: (rows) f32 or None.
  m.def(
      "layer_forward",
      [](int64_t rows, int64_t cols, int dtype, float eps, float weight_offset, H x, H weight, H bias, H y, H mean,
         H rstd) {
        const rmsnorm_config c = make_config(rows, cols, dtype, eps, 1.0f, weight_offset);
        const Sizes n(c);
        const Operand x_("x", x, n.matrix, n.elem, kIn), w_("weight", weight, n.cols, 4, kIn),
            b_("bias", bias, n.cols, 4, kIn), y_("y", y, n.matrix, n.elem, kOut), m_("mean", mean, n.rows, 4, kOut),
            r_("rstd", rstd, n.rows, 4, kOut);
        run([&] {
          return rmsnorm_layernorm_forward(&c, x_.as<const void>(), w_.as<const float>(), b_.as<const float>(),
                                           y_.as<void>(), m_.as<float>(), r_.as<float>());
        });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("weight_offset"),
      nb::arg("x").none(), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("y").none(),
      nb::arg("mean").none(), nb::arg("rstd").none());

  // As rms_backward, plus mean: (rows) f32; mean and rstd both given or both None.
  m.def(
      "layer_backward",
      [](int64_t rows, int64_t cols, int dtype, float eps, float weight_offset, H dy, H x, H weight, H mean, H rstd,
         H dx, H dweight, H dbias) {
        const rmsnorm_config c = make_config(rows, cols, dtype, eps, 1.0f, weight_offset);
        const Sizes n(c);
        const Operand dy_("dy", dy, n.matrix, n.elem, kIn), x_("x", x, n.matrix, n.elem, kIn),
            w_("weight", weight, n.cols, 4, kIn), m_("mean", mean, n.rows, 4, kIn), r_("rstd", rstd, n.rows, 4, kIn),
            dx_("dx", dx, n.matrix, n.elem, kOut), dw_("dweight", dweight, n.cols, 4, kOut),
            db_("dbias", dbias, n.cols, 4, kOut);
        run([&] {
          return rmsnorm_layernorm_backward(&c, dy_.as<const void>(), x_.as<const void>(), w_.as<const float>(),
                                            m_.as<const float>(), r_.as<const float>(), dx_.as<void>(),
                                            dw_.as<float>(), db_.as<float>());
        });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("weight_offset"),
      nb::arg("dy").none(), nb::arg("x").none(), nb::arg("weight").none(), nb::arg("mean").none(),
      nb::arg("rstd").none(), nb::arg("dx").none(), nb::arg("dweight").none(), nb::arg("dbias").none());

  m.def(
      "l2_forward",
      [](int64_t rows, int64_t cols, int dtype, float eps, float weight_offset, H x, H weight, H bias, H y, H rstd) {
        const rmsnorm_config c = make_config(rows, cols, dtype, eps, 1.0f, weight_offset);
        const Sizes n(c);
        const Operand x_("x", x, n.matrix, n.elem, kIn), w_("weight", weight, n.cols, 4, kIn),
            b_("bias", bias, n.cols, 4, kIn), y_("y", y, n.matrix, n.elem, kOut), r_("rstd", rstd, n.rows, 4, kOut);
        run([&] {
          return rmsnorm_l2norm_forward(&c, x_.as<const void>(), w_.as<const float>(), b_.as<const float>(),
                                        y_.as<void>(), r_.as<float>());
        });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("weight_offset"),
      nb::arg("x").none(), nb::arg("weight").none(), nb::arg("bias").none(), nb::arg("y").none(),
      nb::arg("rstd").none());

  m.def(
      "l2_backward",
      [](int64_t rows, int64_t cols, int dtype, float eps, float weight_offset, H dy, H x, H weight, H rstd, H dx,
         H dweight, H dbias) {
        const rmsnorm_config c = make_config(rows, cols, dtype, eps, 1.0f, weight_offset);
        const Sizes n(c);
        const Operand dy_("dy", dy, n.matrix, n.elem, kIn), x_("x", x, n.matrix, n.elem, kIn),
            w_("weight", weight, n.cols, 4, kIn), r_("rstd", rstd, n.rows, 4, kIn),
            dx_("dx", dx, n.matrix, n.elem, kOut), dw_("dweight", dweight, n.cols, 4, kOut),
            db_("dbias", dbias, n.cols, 4, kOut);
        run([&] {
          return rmsnorm_l2norm_backward(&c, dy_.as<const void>(), x_.as<const void>(), w_.as<const float>(),
                                         r_.as<const float>(), dx_.as<void>(), dw_.as<float>(), db_.as<float>());
        });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("weight_offset"),
      nb::arg("dy").none(), nb::arg("x").none(), nb::arg("weight").none(), nb::arg("rstd").none(),
      nb::arg("dx").none(), nb::arg("dweight").none(), nb::arg("dbias").none());

  m.def(
      "partial_size",
      [](int64_t cols, float partial) {
        const int64_t k = rmsnorm_partial_size(cols, partial);
        if (k < 0) raise_status(RMSNORM_ERROR_INVALID_ARGUMENT);
        return k;
      },
      nb::arg("cols"), nb::arg("partial"));

  m.def("set_num_threads", [](int n) { rmsnorm_set_num_threads(n); }, nb::arg("n"));
  m.def("get_num_threads", [] { return rmsnorm_get_num_threads(); });
  m.def(
      "set_backend",
      [](int backend) {
        if (backend != RMSNORM_BACKEND_AUTO && backend != RMSNORM_BACKEND_REFERENCE)
          throw nb::value_error(("rmsnorm: backend code must be 0 or 1, got " + std::to_string(backend)).c_str());
        const rmsnorm_status status = rmsnorm_set_backend(static_cast<rmsnorm_backend>(backend));
        if (status != RMSNORM_OK) raise_status(status);
      },
      nb::arg("backend"));
  m.def("get_backend", [] { return static_cast<int>(rmsnorm_get_backend()); });
  m.def("cpu_target", [] { return std::string(rmsnorm_cpu_target()); });
  m.def(
      "set_cpu_target",
      [](const std::string& name) {
        const rmsnorm_status status = rmsnorm_set_cpu_target(name.c_str());
        if (status != RMSNORM_OK) raise_status(status);
      },
      nb::arg("name"));
  m.def("version", [] { return std::string(rmsnorm_version()); });
}
