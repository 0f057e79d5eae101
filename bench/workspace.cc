#include "workspace.h"

namespace rmsnorm_bench {

void Workspace::Prepare(rmsnorm_dtype dtype, Shape shape) {
  if (dtype == dtype_ && shape == shape_ && weight_) return;
  for (auto& t : tensors_) t.reset();  // before allocating the next shape: peak memory stays one shape
  dtype_ = dtype;
  shape_ = shape;
  weight_ = std::make_unique<Tensor>(RMSNORM_F32, size_t(shape.cols));
  bias_ = std::make_unique<Tensor>(RMSNORM_F32, size_t(shape.cols));
  auto* weight = static_cast<float*>(weight_->data());
  auto* bias = static_cast<float*>(bias_->data());
  for (int64_t i = 0; i < shape.cols; ++i) {
    weight[i] = 1.0f + 0.001f * float(i % 97);
    bias[i] = 0.01f * float(i % 13) - 0.06f;
  }
}

void* Workspace::Get(Role role) {
  std::unique_ptr<Tensor>& t = tensors_[size_t(role)];
  if (!t) {
    t = std::make_unique<Tensor>(dtype_, size_t(shape_.rows * shape_.cols));
    const bool input = role == Role::kX || role == Role::kResidual || role == Role::kDy;
    if (input) t->FillRandom(uint64_t(role) + 1);
  }
  return t->data();
}

}  // namespace rmsnorm_bench
