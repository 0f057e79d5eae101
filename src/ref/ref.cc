// The reference backend's entry points: pick the storage type (registry/dtypes.inc), then run the
// templates in norms.h.
#include "ref/norms.h"
#include "ref/quantize.h"
#include "registry/registry.h"

namespace rmsnorm::ref {
namespace {

template <class T>
Forward<T, float> Typed(const ForwardArgs& a) {
  Forward<T, float> f;
  f.x = static_cast<const T*>(a.x);
  f.residual = static_cast<const T*>(a.residual);
  f.weight = a.weight;
  f.bias = a.bias;
  f.y = static_cast<T*>(a.y);
  f.residual_out = static_cast<T*>(a.residual_out);
  f.mean = a.mean;
  f.rstd = a.rstd;
  return f;
}

template <class T>
Backward<T, float> Typed(const BackwardArgs& a) {
  Backward<T, float> b;
  b.dy = static_cast<const T*>(a.dy);
  b.x = static_cast<const T*>(a.x);
  b.weight = a.weight;
  b.mean = a.mean;
  b.rstd = a.rstd;
  b.dx = static_cast<T*>(a.dx);
  b.dweight = a.dweight;
  b.dbias = a.dbias;
  return b;
}

// RmsForward's rows, each y rounded to f32 and quantized.
template <class T>
void RmsForwardQuantized(const Problem& p, const Forward<T, float>& f, const QuantizedOutput& out) {
  std::vector<double> a, r;
  std::vector<float> y(static_cast<size_t>(p.cols));
  const auto* format = out.format;
  for (int64_t row = 0; row < p.rows; ++row) {
    LoadRmsInput(p, f, row, a, r);
    const double rstd = formula::RmsInverseRoot(p, Row(a));
    for (int64_t i = 0; i < p.cols; ++i) {
      const double bias = f.bias ? double(f.bias[i]) : 0.0;
      y[size_t(i)] = static_cast<float>(formula::Normalized(a[i], 0.0, rstd, Gain(p, f.weight, i), bias));
    }
    auto* q = static_cast<uint8_t*>(out.q) + p.RowStart(registry::kQ, row) * int64_t(format->unit_bytes);
    switch (format->code) {
      case RMSNORM_QUANT_INT8_ROW:
        QuantizeInt8Row(y.data(), p.cols, reinterpret_cast<int8_t*>(q), out.scales + row);
        break;
      case RMSNORM_QUANT_FP8_E4M3_ROW:
        QuantizeFp8E4M3Row(y.data(), p.cols, q, out.scales + row, true);
        break;
      case RMSNORM_QUANT_FP8_E4M3_STATIC: {
        float scale = out.scales[0];
        QuantizeFp8E4M3Row(y.data(), p.cols, q, &scale, false);
        break;
      }
      case RMSNORM_QUANT_Q8_0:
        QuantizeQ8_0Row(y.data(), p.cols, q);
        break;
    }
    if (f.rstd) f.rstd[row] = static_cast<float>(rstd);
  }
}

}  // namespace

void RmsForwardQuantized(const Problem& p, const ForwardArgs& args, const QuantizedOutput& out) {
  registry::WithStorage(p.dtype, [&](auto t) { RmsForwardQuantized(p, Typed<decltype(t)>(args), out); });
}

void RmsForward(const Problem& p, const ForwardArgs& args) {
  registry::WithStorage(p.dtype, [&](auto t) { RmsForward(p, Typed<decltype(t)>(args)); });
}
void RmsBackward(const Problem& p, const BackwardArgs& args) {
  registry::WithStorage(p.dtype, [&](auto t) { RmsBackward(p, Typed<decltype(t)>(args)); });
}
void LayerNormForward(const Problem& p, const ForwardArgs& args) {
  registry::WithStorage(p.dtype, [&](auto t) { LayerNormForward(p, Typed<decltype(t)>(args)); });
}
void LayerNormBackward(const Problem& p, const BackwardArgs& args) {
  registry::WithStorage(p.dtype, [&](auto t) { LayerNormBackward(p, Typed<decltype(t)>(args)); });
}

}  // namespace rmsnorm::ref
