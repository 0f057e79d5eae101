#include "ops.h"

#include <stdexcept>
#include <string>

namespace rmsnorm_bench {
namespace {

void Check(rmsnorm_status status, const char* what) {
  if (status != RMSNORM_OK) throw std::runtime_error(std::string(what) + ": " + rmsnorm_last_error());
}

}  // namespace

OpCall::OpCall(const Case& c, Workspace& workspace)
    : case_(c),
      config_(rmsnorm_config_init(c.shape.rows, c.shape.cols)),
      weight_(workspace.weight()),
      bias_(c.op == Op::kLayerNorm ? workspace.bias() : nullptr),
      mean_(size_t(c.shape.rows)),
      rstd_(size_t(c.shape.rows)) {
  config_.dtype = c.dtype;
  if (c.op == Op::kPRmsNorm) config_.partial = kPartial;
  x_ = workspace.Get(Role::kX);
  if (c.op == Op::kAddRmsNorm) {
    residual_ = workspace.Get(Role::kResidual);
    residual_out_ = workspace.Get(Role::kResidualOut);
  }
  if (c.direction != Direction::kBackward) y_ = workspace.Get(Role::kY);
  if (c.direction != Direction::kForward) {
    dy_ = workspace.Get(Role::kDy);
    dx_ = workspace.Get(Role::kDx);
    dweight_.resize(size_t(c.shape.cols));
    if (c.op == Op::kLayerNorm) dbias_.resize(size_t(c.shape.cols));
  }
  if (c.direction == Direction::kBackward) {
    // The statistics a training step would have saved; y goes to dx, which the backward overwrites.
    void* y = y_;
    y_ = dx_;
    Forward();
    y_ = y;
  }
}

void OpCall::Forward() {
  switch (case_.op) {
    case Op::kRmsNorm:
    case Op::kPRmsNorm:
      return Check(rmsnorm_forward(&config_, x_, weight_, nullptr, y_, rstd_.data()), "rmsnorm_forward");
    case Op::kLayerNorm:
      return Check(rmsnorm_layernorm_forward(&config_, x_, weight_, bias_, y_, mean_.data(), rstd_.data()),
                   "rmsnorm_layernorm_forward");
    case Op::kL2Norm:
      return Check(rmsnorm_l2norm_forward(&config_, x_, weight_, nullptr, y_, rstd_.data()), "rmsnorm_l2norm_forward");
    case Op::kAddRmsNorm:
      return Check(rmsnorm_add_forward(&config_, x_, residual_, weight_, nullptr, y_, residual_out_, rstd_.data()),
                   "rmsnorm_add_forward");
  }
}

void OpCall::Backward() {
  float* dbias = dbias_.empty() ? nullptr : dbias_.data();
  switch (case_.op) {
    case Op::kRmsNorm:
    case Op::kPRmsNorm:
      return Check(rmsnorm_backward(&config_, dy_, x_, weight_, rstd_.data(), dx_, dweight_.data(), dbias),
                   "rmsnorm_backward");
    case Op::kLayerNorm:
      return Check(rmsnorm_layernorm_backward(&config_, dy_, x_, weight_, mean_.data(), rstd_.data(), dx_,
                                              dweight_.data(), dbias),
                   "rmsnorm_layernorm_backward");
    case Op::kL2Norm:
      return Check(rmsnorm_l2norm_backward(&config_, dy_, x_, weight_, rstd_.data(), dx_, dweight_.data(), dbias),
                   "rmsnorm_l2norm_backward");
    case Op::kAddRmsNorm:
      throw std::runtime_error("add_rmsnorm has no backward in the C ABI");
  }
}

void OpCall::Run() {
  if (case_.direction != Direction::kBackward) Forward();
  if (case_.direction != Direction::kForward) Backward();
}

}  // namespace rmsnorm_bench
