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
#include <nanobind/stl/array.h>
#include <nanobind/stl/string.h>

#include <array>
#include <cctype>
#include <cstdint>
#include <memory>
#include <new>
#include <string>

#include "registry/registry.h"
#include "rmsnorm/rmsnorm.h"

namespace nb = nanobind;
namespace reg = rmsnorm::registry;

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

// The elements and element size of one tensor of an op under a config. A negative or overflowing count
// becomes -1, which no buffer matches; the library rejects such a config on its own when only addresses
// are given.
struct TensorSize {
  int64_t count, elem_bytes;
  TensorSize(const rmsnorm_config& c, reg::Tensor tensor) {
    const reg::Shape shape = reg::Info(tensor).shape;
    elem_bytes = shape == reg::Shape::kRowsCols ? int64_t(reg::DtypeSize(c.dtype)) : int64_t(sizeof(float));
    count = shape == reg::Shape::kCols ? c.cols : c.rows;
    if (shape == reg::Shape::kRowsCols && (c.cols < 0 || __builtin_mul_overflow(c.rows, c.cols, &count))) count = -1;
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
  if (reg::FindDtype(dtype) == nullptr) {
    std::string codes;
    for (const reg::DtypeInfo& d : reg::kDtypes)
      codes += (codes.empty() ? "" : ", ") + std::to_string(int(d.code)) + " (" + d.name + ")";
    throw nb::value_error(("rmsnorm: dtype code must be one of " + codes + ", got " + std::to_string(dtype)).c_str());
  }
  rmsnorm_config c = rmsnorm_config_init(rows, cols);
  c.dtype = static_cast<rmsnorm_dtype>(dtype);
  c.eps = eps;
  c.partial = partial;
  c.weight_offset = weight_offset;
  return c;
}

// Kernels run without the GIL so other Python threads (data loaders, DDP's reducer) keep going, except
// calls over fewer than kKeepGilElements elements (a decode row), where releasing and taking back the GIL
// would be a noticeable share of the call and other threads would gain next to nothing.
constexpr int64_t kKeepGilElements = 16384;

template <class Call>
void run(const rmsnorm_config& c, const Call& call) {
  rmsnorm_status status;
  int64_t elements = 0;
  if (c.rows >= 0 && c.cols >= 0 && !__builtin_mul_overflow(c.rows, c.cols, &elements) && elements < kKeepGilElements) {
    status = call();
  } else {
    nb::gil_scoped_release release;
    status = call();
  }
  if (status != RMSNORM_OK) raise_status(status);
}

template <size_t I>
using Handle = nb::handle;

// One tensor argument of an op, sized by its shape under the config.
Operand OperandOf(const rmsnorm_config& c, reg::TensorUse use, nb::handle h) {
  const TensorSize size(c, use.tensor);
  return Operand(reg::Info(use.tensor).name, h, size.count, size.elem_bytes, reg::IsOutput(use.role));
}

// rmsnorm._C.<python_name>(rows, cols, dtype, eps, partial, weight_offset, <tensors>): one function per
// operation of registry/ops.inc, its tensors named and ordered as there (None for NULL). Each buffer's
// size is checked against its shape (rows, cols, or rows x cols in dtype) before the call.
template <size_t kOp, size_t... I>
void DefineOp(nb::module_& m, std::index_sequence<I...>) {
  constexpr const reg::OpInfo& op = reg::kOps[kOp];
  m.def(
      op.python_name,
      [](int64_t rows, int64_t cols, int dtype, float eps, float partial, float weight_offset, Handle<I>... tensors) {
        constexpr const reg::OpInfo& info = reg::kOps[kOp];
        const rmsnorm_config c = make_config(rows, cols, dtype, eps, partial, weight_offset);
        const nb::handle handles[] = {tensors...};
        const Operand operands[] = {OperandOf(c, info.tensors[I], handles[I])...};
        void* ordered[] = {operands[I].template as<void>()...};
        run(c, [&] { return info.call(&c, ordered); });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("partial"), nb::arg("weight_offset"),
      nb::arg(reg::Info(op.tensors[I].tensor).name).none()...);
}

// The op's _ex twin, `<python_name>_ex`: strided rows (rmsnorm_config_ex). inner_rows as in the header;
// strides: (outer, inner) in elements for x, residual, y, residual_out, dy, dx in that order (0 =
// packed). Strided tensors come as addresses (ints): their bytes are not one buffer of rows * cols
// elements, and the library's own checks (layout, alignment, exact overlap) guard them.
template <size_t kOp, size_t... I>
void DefineOpEx(nb::module_& m, std::index_sequence<I...>) {
  constexpr const reg::OpInfo& op = reg::kOps[kOp];
  m.def(
      (std::string(op.python_name) + "_ex").c_str(),
      [](int64_t rows, int64_t cols, int dtype, float eps, float partial, float weight_offset, int64_t inner_rows,
         const std::array<int64_t, 12>& strides, Handle<I>... tensors) {
        constexpr const reg::OpInfo& info = reg::kOps[kOp];
        rmsnorm_config_ex c = rmsnorm_config_ex_init(rows, cols);
        c.base = make_config(rows, cols, dtype, eps, partial, weight_offset);
        c.inner_rows = inner_rows;
        rmsnorm_row_strides* const layouts[] = {&c.x, &c.residual, &c.y, &c.residual_out, &c.dy, &c.dx};
        for (size_t t = 0; t < 6; ++t) *layouts[t] = rmsnorm_row_strides{strides[2 * t], strides[2 * t + 1]};
        const nb::handle handles[] = {tensors...};
        const Operand operands[] = {OperandOf(c.base, info.tensors[I], handles[I])...};
        void* ordered[] = {operands[I].template as<void>()...};
        run(c.base, [&] { return info.call_ex(&c, ordered); });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("partial"), nb::arg("weight_offset"),
      nb::arg("inner_rows"), nb::arg("strides"), nb::arg(reg::Info(op.tensors[I].tensor).name).none()...);
}

// An address that converts to the pointer type of the C parameter it is passed to.
struct AnyPointer {
  void* address;
  template <class T>
  operator T*() const {
    return static_cast<T*>(address);
  }
};

// The quantized forwards (rmsnorm_forward_quantized, rmsnorm_add_forward_quantized), as
// rmsnorm._C.rms_forward_quantized and rms_add_forward_quantized: the _ex arguments (q takes y's strides,
// in q's own elements), then the format code, then the tensors in the C order of registry::kQuantOps.
// A buffer for q must hold rows * (cols / unit_cols) elements of the format's unit_bytes; for scales,
// rows f32 (per-row formats), one f32 (a static scale, read) or nothing (q8_0: None). An unknown format
// code sizes q as bytes and leaves the refusal, and its message, to the library; so does a cols that is
// not a multiple of unit_cols.
template <size_t kQuantOp, size_t... I>
void DefineQuantOp(nb::module_& m, const char* name, std::index_sequence<I...>) {
  m.def(
      name,
      [](int64_t rows, int64_t cols, int dtype, float eps, float partial, float weight_offset, int64_t inner_rows,
         const std::array<int64_t, 12>& strides, int format, Handle<I>... tensors) {
        constexpr const reg::QuantOpInfo& info = reg::kQuantOps[kQuantOp];
        rmsnorm_config_ex c = rmsnorm_config_ex_init(rows, cols);
        c.base = make_config(rows, cols, dtype, eps, partial, weight_offset);
        c.inner_rows = inner_rows;
        rmsnorm_row_strides* const layouts[] = {&c.x, &c.residual, &c.y, &c.residual_out, &c.dy, &c.dx};
        for (size_t t = 0; t < 6; ++t) *layouts[t] = rmsnorm_row_strides{strides[2 * t], strides[2 * t + 1]};
        const reg::QuantFormatInfo* f = reg::FindQuantFormat(format);
        const auto operand = [&](reg::TensorUse use, nb::handle h) {
          const char* tensor_name = reg::Info(use.tensor).name;
          if (use.tensor == reg::kQ) {
            const int64_t unit_cols = f ? f->unit_cols : 1, unit_bytes = f ? int64_t(f->unit_bytes) : 1;
            int64_t count;  // -1, which no buffer matches, for a negative or overflowing size
            if (rows < 0 || cols < 0 || __builtin_mul_overflow(rows, cols / unit_cols, &count)) count = -1;
            return std::make_unique<Operand>(tensor_name, h, count, unit_bytes, true);
          }
          if (use.tensor == reg::kScales) {
            const bool per_row = f && f->scales == reg::QuantScales::kPerRow;
            const int64_t count = per_row ? rows : (f && f->scales == reg::QuantScales::kStatic ? 1 : 0);
            return std::make_unique<Operand>(tensor_name, h, count, int64_t(sizeof(float)), per_row);
          }
          const TensorSize size(c.base, use.tensor);
          return std::make_unique<Operand>(tensor_name, h, size.count, size.elem_bytes, reg::IsOutput(use.role));
        };
        const nb::handle handles[] = {tensors...};
        const std::unique_ptr<Operand> operands[] = {operand(info.tensors[I], handles[I])...};
        const auto code = static_cast<rmsnorm_quant_format>(format);
        run(c.base, [&] {
          if constexpr (kQuantOp == 0)
            return rmsnorm_forward_quantized(&c, code, AnyPointer{operands[I]->template as<void>()}...);
          else
            return rmsnorm_add_forward_quantized(&c, code, AnyPointer{operands[I]->template as<void>()}...);
        });
      },
      nb::arg("rows"), nb::arg("cols"), nb::arg("dtype"), nb::arg("eps"), nb::arg("partial"), nb::arg("weight_offset"),
      nb::arg("inner_rows"), nb::arg("strides"), nb::arg("format"),
      nb::arg(reg::Info(reg::kQuantOps[kQuantOp].tensors[I].tensor).name).none()...);
}

template <size_t... kOp>
void DefineOps(nb::module_& m, std::index_sequence<kOp...>) {
  (DefineOp<kOp>(m, std::make_index_sequence<reg::kOps[kOp].num_tensors>()), ...);
  (DefineOpEx<kOp>(m, std::make_index_sequence<reg::kOps[kOp].num_tensors>()), ...);
}

}  // namespace

NB_MODULE(_C, m) {
  m.doc() = "Low-level binding of the rmsnorm C ABI. Private: use rmsnorm and rmsnorm.torch.";

  m.attr("BACKEND_AUTO") = static_cast<int>(RMSNORM_BACKEND_AUTO);
  m.attr("BACKEND_REFERENCE") = static_cast<int>(RMSNORM_BACKEND_REFERENCE);
  m.attr("HEADER_VERSION") = std::to_string(RMSNORM_VERSION_MAJOR) + "." + std::to_string(RMSNORM_VERSION_MINOR) +
                             "." + std::to_string(RMSNORM_VERSION_PATCH);

  // The dtypes as the C ABI, NumPy and torch spell them: {code: (name, itemsize, numpy, torch)}.
  nb::dict dtypes;
  for (const reg::DtypeInfo& d : reg::kDtypes) {
    dtypes[nb::int_(int(d.code))] = nb::make_tuple(d.name, d.size, d.numpy, d.torch);
    std::string upper = d.name;  // _C.F32, _C.BF16, ...: the codes by name
    for (char& ch : upper) ch = char(std::toupper(static_cast<unsigned char>(ch)));
    m.attr(upper.c_str()) = int(d.code);
  }
  m.attr("DTYPES") = dtypes;

  DefineOps(m, std::make_index_sequence<std::size(reg::kOps)>());
  DefineQuantOp<0>(m, "rms_forward_quantized", std::make_index_sequence<reg::kQuantOps[0].num_tensors>());
  DefineQuantOp<1>(m, "rms_add_forward_quantized", std::make_index_sequence<reg::kQuantOps[1].num_tensors>());

  // The quantized output formats: {code: (name, unit_bytes, unit_cols, scales)} with scales one of
  // "per_row" (written), "static" (one read) and "in_blocks" (none).
  nb::dict quant_formats;
  for (const reg::QuantFormatInfo& f : reg::kQuantFormats) {
    const char* scales = f.scales == reg::QuantScales::kPerRow   ? "per_row"
                         : f.scales == reg::QuantScales::kStatic ? "static"
                                                                 : "in_blocks";
    quant_formats[nb::int_(int(f.code))] = nb::make_tuple(f.name, f.unit_bytes, f.unit_cols, scales);
  }
  m.attr("QUANT_FORMATS") = quant_formats;

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
