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
  if (rmsnorm::registry::Info(c.op).partial) config_.partial = kPartial;
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

// The case's operation of registry/ops.inc, each taking the tensors it lists.
void OpCall::Call(rmsnorm::registry::Op op_id) {
  namespace reg = rmsnorm::registry;
  const reg::OpInfo& op = reg::Info(op_id);
  reg::TensorPointers t;
  t.Set(reg::kX, x_);
  t.Set(reg::kResidual, residual_);
  t.Set(reg::kWeight, weight_);
  t.Set(reg::kBias, bias_);
  t[reg::kY] = y_;
  t[reg::kResidualOut] = residual_out_;
  t[reg::kMean] = mean_.data();
  t[reg::kRstd] = rstd_.data();
  t.Set(reg::kDy, dy_);
  t[reg::kDx] = dx_;
  t[reg::kDweight] = dweight_.empty() ? nullptr : dweight_.data();
  t[reg::kDbias] = dbias_.empty() ? nullptr : dbias_.data();
  Check(op.Call(&config_, t), op.c_function);
}

void OpCall::Forward() { Call(rmsnorm::registry::Info(case_.op).forward); }

void OpCall::Backward() {
  if (rmsnorm::registry::Info(case_.op).fused_add()) throw std::runtime_error("add_rmsnorm has no backward in the C ABI");
  Call(rmsnorm::registry::Info(case_.op).backward);
}

void OpCall::Run() {
  if (case_.direction != Direction::kBackward) Forward();
  if (case_.direction != Direction::kForward) Backward();
}

}  // namespace rmsnorm_bench
