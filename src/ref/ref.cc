// The reference backend's entry points: pick the storage type (registry/dtypes.inc), then run the
// templates in norms.h.
#include "ref/norms.h"
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

}  // namespace

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
