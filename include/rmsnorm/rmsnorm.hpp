// rmsnorm: the C++ API. Header-only over the C ABI in rmsnorm.h, so C and C++ programs share one stable
// binary interface. Views carry their sizes, so a shape mismatch is an exception rather than an overrun;
// every failure throws rmsnorm::Error with the library's status and message.
//
//   std::vector<float> x(rows * cols), y(rows * cols), w(cols, 1.0f);
//   rmsnorm::rms_norm(rmsnorm::matrix(x.data(), rows, cols), rmsnorm::matrix(y.data(), rows, cols),
//                     rmsnorm::NormArgs{}.with_weight(w).with_eps(1e-5f));
#ifndef RMSNORM_RMSNORM_HPP_
#define RMSNORM_RMSNORM_HPP_

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "rmsnorm/rmsnorm.h"

namespace rmsnorm {

// ---- Storage types ------------------------------------------------------------------------------
// bf16 and f16 are storage only: convert to float to compute. Conversions round to nearest even,
// keep NaN a (quiet) NaN, and overflow to infinity.

namespace detail {
inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
}  // namespace detail

struct bf16 {
  uint16_t bits = 0;
  bf16() = default;
  explicit bf16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return detail::bits_float(uint32_t{bits} << 16); }
  static bf16 from_bits(uint16_t b) {
    bf16 v;
    v.bits = b;
    return v;
  }
  static uint16_t from_float(float f) {
    const uint32_t u = detail::float_bits(f);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
    const uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);                                     // to even
    return static_cast<uint16_t>((u + rounding) >> 16);
  }
};

struct f16 {
  uint16_t bits = 0;
  f16() = default;
  explicit f16(float f) : bits(from_float(f)) {}
  explicit operator float() const { return to_float(bits); }
  static f16 from_bits(uint16_t b) {
    f16 v;
    v.bits = b;
    return v;
  }
  static float to_float(uint16_t h) {
    const uint32_t sign = uint32_t{h & 0x8000u} << 16;
    const uint32_t exponent = (h >> 10) & 0x1Fu;
    const uint32_t mantissa = h & 0x3FFu;
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in f32
      const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
      return detail::bits_float(sign | detail::float_bits(magnitude));
    }
    if (exponent == 31) return detail::bits_float(sign | 0x7F800000u | (mantissa << 13));
    return detail::bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  static uint16_t from_float(float f) {
    const uint32_t u = detail::float_bits(f);
    const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
    const uint32_t magnitude = u & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
    if (magnitude >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // rounds past 65504
    if (magnitude >= 0x38800000u) {                                                // normal f16
      const uint32_t rebiased = magnitude - (112u << 23);
      return static_cast<uint16_t>(sign | ((rebiased + 0xFFFu + ((rebiased >> 13) & 1u)) >> 13));
    }
    // Subnormal f16: the value in units of 2^-24, rounded to nearest even. Scaling by 2^24 is exact and
    // 1024 units is the smallest normal, whose encoding 0x0400 is exactly 1024.
    const float units = detail::bits_float(magnitude) * 16777216.0f;
    const uint32_t whole = static_cast<uint32_t>(units);
    const float fraction = units - static_cast<float>(whole);
    const uint32_t rounded = whole + ((fraction > 0.5f || (fraction == 0.5f && (whole & 1u))) ? 1u : 0u);
    return static_cast<uint16_t>(sign | rounded);
  }
};

template <class T>
struct dtype_of;
template <>
struct dtype_of<float> : std::integral_constant<rmsnorm_dtype, RMSNORM_F32> {};
template <>
struct dtype_of<bf16> : std::integral_constant<rmsnorm_dtype, RMSNORM_BF16> {};
template <>
struct dtype_of<f16> : std::integral_constant<rmsnorm_dtype, RMSNORM_F16> {};

// ---- Errors -------------------------------------------------------------------------------------

class Error : public std::runtime_error {
 public:
  Error(rmsnorm_status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  rmsnorm_status status() const { return status_; }

 private:
  rmsnorm_status status_;
};

namespace detail {
inline void check(rmsnorm_status status) {
  if (status != RMSNORM_OK) throw Error(status, rmsnorm_last_error());
}
[[noreturn]] inline void fail(const std::string& message) {
  throw Error(RMSNORM_ERROR_INVALID_ARGUMENT, message);
}
}  // namespace detail

// ---- Views --------------------------------------------------------------------------------------

// A contiguous run of `size` elements; default-constructed means "absent" (no gain, skip the output...).
template <class T>
class Span {
 public:
  Span() = default;
  Span(T* data, int64_t size) : data_(data), size_(size) {}
  template <class U, class = std::enable_if_t<std::is_convertible<U*, T*>::value>>
  Span(std::vector<U>& v) : data_(v.data()), size_(static_cast<int64_t>(v.size())) {}  // NOLINT
  template <class U, class = std::enable_if_t<std::is_convertible<const U*, T*>::value>>
  Span(const std::vector<U>& v) : data_(v.data()), size_(static_cast<int64_t>(v.size())) {}  // NOLINT
  // A view of a temporary would dangle once the statement ends: refuse it at compile time.
  template <class U>
  Span(std::vector<U>&& v) = delete;  // NOLINT
  T* data() const { return data_; }
  int64_t size() const { return size_; }
  bool empty() const { return data_ == nullptr; }

 private:
  T* data_ = nullptr;
  int64_t size_ = 0;
};

// A row-major (rows, cols) matrix: contiguous, or with rows `row_stride` elements apart, or with rows
// indexed by (outer, inner) = (r / inner_rows, r % inner_rows) at two strides, such as QK-norm's
// (tokens, heads) inside a fused QKV buffer (see head_matrix). Strided matrices go through the C ABI's
// _ex calls; rows must not overlap and must lie in row order.
template <class T>
class Matrix {
 public:
  Matrix() = default;
  Matrix(T* data, int64_t rows, int64_t cols) : data_(data), rows_(rows), cols_(cols) {}
  Matrix(T* data, int64_t rows, int64_t cols, int64_t row_stride)
      : data_(data), rows_(rows), cols_(cols), outer_stride_(row_stride) {}
  Matrix(T* data, int64_t outer_rows, int64_t inner_rows, int64_t cols, int64_t outer_stride, int64_t inner_stride)
      : data_(data),
        rows_(outer_rows * inner_rows),
        cols_(cols),
        inner_rows_(inner_rows),
        outer_stride_(outer_stride),
        inner_stride_(inner_stride) {}
  template <class U, class = std::enable_if_t<std::is_convertible<U*, T*>::value>>
  Matrix(const Matrix<U>& m)  // NOLINT
      : data_(m.data()),
        rows_(m.rows()),
        cols_(m.cols()),
        inner_rows_(m.inner_rows()),
        outer_stride_(m.outer_stride()),
        inner_stride_(m.inner_stride()) {}
  T* data() const { return data_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int64_t inner_rows() const { return inner_rows_; }      // 1: one level
  int64_t outer_stride() const { return outer_stride_; }  // 0: packed
  int64_t inner_stride() const { return inner_stride_; }  // 0: packed (cols)
  bool packed() const {
    return (outer_stride_ == 0 || outer_stride_ == inner_rows_ * cols_) && (inner_stride_ == 0 || inner_stride_ == cols_);
  }

 private:
  T* data_ = nullptr;
  int64_t rows_ = 0, cols_ = 0;
  int64_t inner_rows_ = 1;
  int64_t outer_stride_ = 0, inner_stride_ = 0;
};

template <class T>
Matrix<T> matrix(T* data, int64_t rows, int64_t cols) {
  return Matrix<T>(data, rows, cols);
}
// A view of a vector holding `rows * cols` elements for some rows; throws if its size is no multiple of cols.
template <class T>
Matrix<T> matrix(std::vector<T>& v, int64_t cols) {
  if (cols < 1 || static_cast<int64_t>(v.size()) % cols != 0) detail::fail("vector size is not a multiple of cols");
  return Matrix<T>(v.data(), static_cast<int64_t>(v.size()) / cols, cols);
}
template <class T>
Matrix<const T> matrix(const std::vector<T>& v, int64_t cols) {
  if (cols < 1 || static_cast<int64_t>(v.size()) % cols != 0) detail::fail("vector size is not a multiple of cols");
  return Matrix<const T>(v.data(), static_cast<int64_t>(v.size()) / cols, cols);
}
// rows of cols elements, row_stride elements apart.
template <class T>
Matrix<T> matrix(T* data, int64_t rows, int64_t cols, int64_t row_stride) {
  return Matrix<T>(data, rows, cols, row_stride);
}
// The heads of a (tokens, heads, head_dim) slice of a bigger buffer, one row per (token, head): tokens
// token_stride elements apart, heads head_stride apart (head_dim by default). For QK-norm in
// qkv[tokens][(hq + 2 * hkv) * d]: head_matrix(qkv, tokens, hq, d, (hq + 2 * hkv) * d) for q and
// head_matrix(qkv + hq * d, tokens, hkv, d, (hq + 2 * hkv) * d) for k.
template <class T>
Matrix<T> head_matrix(T* data, int64_t tokens, int64_t heads, int64_t head_dim, int64_t token_stride,
                      int64_t head_stride = 0) {
  return Matrix<T>(data, tokens, heads, head_dim, token_stride, head_stride == 0 ? head_dim : head_stride);
}

// ---- Arguments ----------------------------------------------------------------------------------

// The parameters every norm takes. Chainable: NormArgs{}.with_weight(w).with_eps(1e-5f).
struct NormArgs {
  Span<const float> weight;  // (cols) gain, or absent for 1
  Span<const float> bias;    // (cols), or absent
  float eps = 1e-6f;
  float partial = 1.0f;        // pRMSNorm's p, RMSNorm only
  float weight_offset = 0.0f;  // gain used is weight_offset + weight[i] (Gemma stores w, uses 1 + w)

  NormArgs& with_weight(Span<const float> w) { weight = w; return *this; }
  NormArgs& with_bias(Span<const float> b) { bias = b; return *this; }
  NormArgs& with_eps(float e) { eps = e; return *this; }
  NormArgs& with_partial(float p) { partial = p; return *this; }
  NormArgs& with_weight_offset(float o) { weight_offset = o; return *this; }
};

// Gradients of the parameters: each absent one is skipped.
struct ParamGrads {
  Span<float> dweight;  // (cols)
  Span<float> dbias;    // (cols)
};

namespace detail {
// The strided call's config: the plain one as its base, the row split every matrix of the call shares
// (a packed or one-level matrix fits any split; two two-level ones must agree), and each matrix's
// strides, or null when every matrix is packed (then the plain call runs).
struct Layouts {
  int64_t inner_rows = 1;
  bool strided = false;
  template <class T>
  void add(const Matrix<T>& m) {
    if (m.packed()) return;
    strided = true;
    if (m.inner_rows() == 1) return;
    if (inner_rows != 1 && inner_rows != m.inner_rows())
      fail("matrices split their rows in two levels differently (" + std::to_string(inner_rows) + " and " +
           std::to_string(m.inner_rows()) + " inner rows)");
    inner_rows = m.inner_rows();
  }
  template <class T>
  rmsnorm_row_strides of(const Matrix<T>& m) const {
    if (m.packed()) return rmsnorm_row_strides{0, 0};
    if (m.inner_rows() == 1) return rmsnorm_row_strides{m.outer_stride() * inner_rows, m.outer_stride()};
    return rmsnorm_row_strides{m.outer_stride(), m.inner_stride()};
  }
};
template <class T>
rmsnorm_config config_for(const Matrix<T>& x, const NormArgs& args);
template <class T>
rmsnorm_config_ex config_ex_for(const Matrix<T>& x, const NormArgs& args, const Layouts& layouts) {
  rmsnorm_config_ex c = rmsnorm_config_ex_init(x.rows(), x.cols());
  c.base = config_for(x, args);
  c.inner_rows = layouts.inner_rows;
  return c;
}
template <class T>
rmsnorm_config config_for(const Matrix<T>& x, const NormArgs& args) {
  rmsnorm_config c = rmsnorm_config_init(x.rows(), x.cols());
  c.dtype = dtype_of<std::remove_const_t<T>>::value;
  c.eps = args.eps;
  c.partial = args.partial;
  c.weight_offset = args.weight_offset;
  return c;
}
template <class A, class B>
void same_shape(const Matrix<A>& a, const Matrix<B>& b, const char* name) {
  if (a.rows() != b.rows() || a.cols() != b.cols())
    fail(std::string(name) + " has shape (" + std::to_string(b.rows()) + ", " + std::to_string(b.cols()) +
         "), expected (" + std::to_string(a.rows()) + ", " + std::to_string(a.cols()) + ")");
}
template <class T>
T* sized(Span<T> s, int64_t n, const char* name) {
  if (s.empty()) return nullptr;
  if (s.size() != n)
    fail(std::string(name) + " has " + std::to_string(s.size()) + " elements, expected " + std::to_string(n));
  return s.data();
}
}  // namespace detail

// ---- Norms --------------------------------------------------------------------------------------
// T is float, bf16 or f16, deduced from the output; inputs are read-only views of the same type.
// Outputs may alias inputs exactly as rmsnorm.h allows.

namespace detail {
template <class T>
struct type_identity {
  using type = T;
};
}  // namespace detail
template <class T>
using In = Matrix<const typename detail::type_identity<T>::type>;  // not deduced: T comes from the output

namespace detail {
// Runs plain(config) when every matrix of the call is packed, else ex(config_ex) with each matrix's
// strides set by set_strides(config_ex, layouts).
template <class T, class Plain, class Ex, class SetStrides>
void run(const Matrix<T>& x, const NormArgs& args, const Layouts& layouts, const Plain& plain, const Ex& ex,
         const SetStrides& set_strides) {
  if (!layouts.strided) {
    const rmsnorm_config c = config_for(x, args);
    return check(plain(&c));
  }
  rmsnorm_config_ex c = config_ex_for(x, args, layouts);
  set_strides(c);
  check(ex(&c));
}
template <class... M>
Layouts layouts_of(const M&... matrices) {
  Layouts l;
  const int each[] = {(l.add(matrices), 0)...};
  (void)each;
  return l;
}
}  // namespace detail

// RMSNorm / pRMSNorm. rstd: (rows), optional.
template <class T>
void rms_norm(In<T> x, Matrix<T> y, const NormArgs& args = {}, Span<float> rstd = {}) {
  detail::same_shape(x, y, "y");
  const float* w = detail::sized(args.weight, x.cols(), "weight");
  const float* b = detail::sized(args.bias, x.cols(), "bias");
  float* r = detail::sized(rstd, x.rows(), "rstd");
  const detail::Layouts l = detail::layouts_of(x, y);
  detail::run(
      x, args, l, [&](const rmsnorm_config* c) { return rmsnorm_forward(c, x.data(), w, b, y.data(), r); },
      [&](const rmsnorm_config_ex* c) { return rmsnorm_forward_ex(c, x.data(), w, b, y.data(), r); },
      [&](rmsnorm_config_ex& c) { c.x = l.of(x), c.y = l.of(y); });
}

// h = x + residual (stored to residual_out), y = RMSNorm(h).
template <class T>
void add_rms_norm(In<T> x, In<T> residual, Matrix<T> y, Matrix<T> residual_out,
                  const NormArgs& args = {}, Span<float> rstd = {}) {
  detail::same_shape(x, residual, "residual");
  detail::same_shape(x, y, "y");
  detail::same_shape(x, residual_out, "residual_out");
  const float* w = detail::sized(args.weight, x.cols(), "weight");
  const float* b = detail::sized(args.bias, x.cols(), "bias");
  float* r = detail::sized(rstd, x.rows(), "rstd");
  const detail::Layouts l = detail::layouts_of(x, residual, y, residual_out);
  detail::run(
      x, args, l,
      [&](const rmsnorm_config* c) {
        return rmsnorm_add_forward(c, x.data(), residual.data(), w, b, y.data(), residual_out.data(), r);
      },
      [&](const rmsnorm_config_ex* c) {
        return rmsnorm_add_forward_ex(c, x.data(), residual.data(), w, b, y.data(), residual_out.data(), r);
      },
      [&](rmsnorm_config_ex& c) {
        c.x = l.of(x), c.residual = l.of(residual), c.y = l.of(y), c.residual_out = l.of(residual_out);
      });
}

// rstd absent: recomputed from x.
template <class T>
void rms_norm_backward(In<T> dy, In<T> x, Matrix<T> dx, const NormArgs& args = {},
                       Span<const float> rstd = {}, ParamGrads grads = {}) {
  detail::same_shape(x, dy, "dy");
  detail::same_shape(x, dx, "dx");
  const float* w = detail::sized(args.weight, x.cols(), "weight");
  const float* r = detail::sized(rstd, x.rows(), "rstd");
  float* dw = detail::sized(grads.dweight, x.cols(), "dweight");
  float* db = detail::sized(grads.dbias, x.cols(), "dbias");
  const detail::Layouts l = detail::layouts_of(dy, x, dx);
  detail::run(
      x, args, l,
      [&](const rmsnorm_config* c) { return rmsnorm_backward(c, dy.data(), x.data(), w, r, dx.data(), dw, db); },
      [&](const rmsnorm_config_ex* c) { return rmsnorm_backward_ex(c, dy.data(), x.data(), w, r, dx.data(), dw, db); },
      [&](rmsnorm_config_ex& c) { c.dy = l.of(dy), c.x = l.of(x), c.dx = l.of(dx); });
}

// L2-Norm: y = x / sqrt(sum(x^2) + eps) * g (+ b). rstd is 1/sqrt(sum(x^2) + eps).
template <class T>
void l2_norm(In<T> x, Matrix<T> y, const NormArgs& args = {}, Span<float> rstd = {}) {
  detail::same_shape(x, y, "y");
  const float* w = detail::sized(args.weight, x.cols(), "weight");
  const float* b = detail::sized(args.bias, x.cols(), "bias");
  float* r = detail::sized(rstd, x.rows(), "rstd");
  const detail::Layouts l = detail::layouts_of(x, y);
  detail::run(
      x, args, l, [&](const rmsnorm_config* c) { return rmsnorm_l2norm_forward(c, x.data(), w, b, y.data(), r); },
      [&](const rmsnorm_config_ex* c) { return rmsnorm_l2norm_forward_ex(c, x.data(), w, b, y.data(), r); },
      [&](rmsnorm_config_ex& c) { c.x = l.of(x), c.y = l.of(y); });
}

template <class T>
void l2_norm_backward(In<T> dy, In<T> x, Matrix<T> dx, const NormArgs& args = {},
                      Span<const float> rstd = {}, ParamGrads grads = {}) {
  detail::same_shape(x, dy, "dy");
  detail::same_shape(x, dx, "dx");
  const float* w = detail::sized(args.weight, x.cols(), "weight");
  const float* r = detail::sized(rstd, x.rows(), "rstd");
  float* dw = detail::sized(grads.dweight, x.cols(), "dweight");
  float* db = detail::sized(grads.dbias, x.cols(), "dbias");
  const detail::Layouts l = detail::layouts_of(dy, x, dx);
  detail::run(
      x, args, l,
      [&](const rmsnorm_config* c) { return rmsnorm_l2norm_backward(c, dy.data(), x.data(), w, r, dx.data(), dw, db); },
      [&](const rmsnorm_config_ex* c) {
        return rmsnorm_l2norm_backward_ex(c, dy.data(), x.data(), w, r, dx.data(), dw, db);
      },
      [&](rmsnorm_config_ex& c) { c.dy = l.of(dy), c.x = l.of(x), c.dx = l.of(dx); });
}

// LayerNorm. mean, rstd: (rows), optional.
template <class T>
void layer_norm(In<T> x, Matrix<T> y, const NormArgs& args = {}, Span<float> mean = {},
                Span<float> rstd = {}) {
  detail::same_shape(x, y, "y");
  const float* w = detail::sized(args.weight, x.cols(), "weight");
  const float* b = detail::sized(args.bias, x.cols(), "bias");
  float* m = detail::sized(mean, x.rows(), "mean");
  float* r = detail::sized(rstd, x.rows(), "rstd");
  const detail::Layouts l = detail::layouts_of(x, y);
  detail::run(
      x, args, l,
      [&](const rmsnorm_config* c) { return rmsnorm_layernorm_forward(c, x.data(), w, b, y.data(), m, r); },
      [&](const rmsnorm_config_ex* c) { return rmsnorm_layernorm_forward_ex(c, x.data(), w, b, y.data(), m, r); },
      [&](rmsnorm_config_ex& c) { c.x = l.of(x), c.y = l.of(y); });
}

// mean and rstd both given or both absent (recomputed from x).
template <class T>
void layer_norm_backward(In<T> dy, In<T> x, Matrix<T> dx, const NormArgs& args = {},
                         Span<const float> mean = {}, Span<const float> rstd = {}, ParamGrads grads = {}) {
  detail::same_shape(x, dy, "dy");
  detail::same_shape(x, dx, "dx");
  const float* w = detail::sized(args.weight, x.cols(), "weight");
  const float* m = detail::sized(mean, x.rows(), "mean");
  const float* r = detail::sized(rstd, x.rows(), "rstd");
  float* dw = detail::sized(grads.dweight, x.cols(), "dweight");
  float* db = detail::sized(grads.dbias, x.cols(), "dbias");
  const detail::Layouts l = detail::layouts_of(dy, x, dx);
  detail::run(
      x, args, l,
      [&](const rmsnorm_config* c) {
        return rmsnorm_layernorm_backward(c, dy.data(), x.data(), w, m, r, dx.data(), dw, db);
      },
      [&](const rmsnorm_config_ex* c) {
        return rmsnorm_layernorm_backward_ex(c, dy.data(), x.data(), w, m, r, dx.data(), dw, db);
      },
      [&](rmsnorm_config_ex& c) { c.dy = l.of(dy), c.x = l.of(x), c.dx = l.of(dx); });
}

// ---- Library settings ---------------------------------------------------------------------------

inline void set_num_threads(int n) { rmsnorm_set_num_threads(n); }
inline int num_threads() { return rmsnorm_get_num_threads(); }
inline int64_t partial_size(int64_t cols, float partial) {
  const int64_t k = rmsnorm_partial_size(cols, partial);
  if (k < 0) throw Error(RMSNORM_ERROR_INVALID_ARGUMENT, rmsnorm_last_error());
  return k;
}
enum class Backend { kAuto = RMSNORM_BACKEND_AUTO, kReference = RMSNORM_BACKEND_REFERENCE };
inline void set_backend(Backend b) { detail::check(rmsnorm_set_backend(static_cast<rmsnorm_backend>(b))); }
inline Backend backend() { return static_cast<Backend>(rmsnorm_get_backend()); }
inline const char* cpu_target() { return rmsnorm_cpu_target(); }
// The best target at or below `name` ("AVX2", "SSE4", "SCALAR", ...; "auto" or "" for the best).
inline void set_cpu_target(const char* name) { detail::check(rmsnorm_set_cpu_target(name)); }

}  // namespace rmsnorm

#endif  // RMSNORM_RMSNORM_HPP_
