// A task: a data set, a model family and a metric, instantiated once per norm. The interleaved trainer
// sees tasks and variants only through these interfaces.
#ifndef RMSNORM_REPRO_TRAIN_TASK_H_
#define RMSNORM_REPRO_TRAIN_TASK_H_

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "common/adam.h"
#include "common/norm_layer.h"
#include "common/param.h"

namespace repro {

// One model under one norm, on its task's data.
class Variant {
 public:
  virtual ~Variant() = default;
  // Forward and backward on training batch `step`: the same batch for every norm of a seed. Returns the
  // batch's mean loss in the task's loss unit; the gradients land in params().
  virtual double forward_backward(int64_t step) = 0;
  // The task's metric on held-out data.
  virtual double evaluate() = 0;
  virtual std::vector<Param*> params() = 0;
  // The task's second metric from the last evaluate() (chrF beside BLEU), NaN when it has none.
  virtual double secondary_metric() const { return std::numeric_limits<double>::quiet_NaN(); }
  // The outputs of the last evaluate(), one a line (the test translations), or none.
  virtual std::vector<std::string> outputs() const { return {}; }
  // p-value of a significance test of the difference between this variant's last evaluation and
  // baseline's (same task and seed), NaN when the task has no such test.
  virtual double p_value_against(const Variant& baseline) const {
    (void)baseline;
    return std::numeric_limits<double>::quiet_NaN();
  }

  NormClock clock;  // time inside normalization, filled by the model's NormLayers
};

struct TaskInfo {
  std::string name;         // "gru-kjv": the key in results.json
  std::string title;        // a line for people
  std::string model;        // sizes and placement of the norm
  std::string data;         // data set and split
  std::string metric;       // "valid bpc", "test error %"
  std::string secondary_metric;  // "chrF", or "" when the task has one metric
  bool lower_is_better = true;
  std::string loss_unit;    // of the training curve: "bits/char", "nats"
  float partial = 0.0625f;  // pRMSNorm's p for this task
  int64_t steps = 0;        // optimizer steps per variant
  int64_t chunk = 0;        // steps one variant runs before the next takes over
  // Relative cost of one training step, the same unit for every task (from a demo report's s / 1k steps;
  // only the order of steps x cost matters much): when several tasks train at once, the longest start
  // first so the workers end together.
  double step_cost = 1.0;
  AdamConfig adam;
};

class Task {
 public:
  explicit Task(TaskInfo info) : info_(std::move(info)) {}
  virtual ~Task() = default;
  const TaskInfo& info() const { return info_; }
  // A fresh model under `norm`, initialized from `seed` (the same initial weights for every norm
  // where the shapes agree: the norm's own gain and bias start at 1 and 0).
  virtual std::unique_ptr<Variant> make_variant(const NormConfig& norm, uint64_t seed) = 0;
  // Runs `steps` steps instead, with the warmup scaled in proportion and the decay ending at `steps`.
  void override_steps(int64_t steps);
  void override_learning_rate(float lr) { info_.adam.lr = lr; }
  // What the variants' outputs() are scored against, one a line (the test references), or none.
  virtual std::vector<std::string> references() const { return {}; }

 protected:
  TaskInfo& mutable_info() { return info_; }  // for descriptions that need the loaded data

 private:
  TaskInfo info_;
};

// How big a run is: the unit tests' tiny one, `make demo`'s short one, or `make repro`'s longer one.
enum class Scale { kTiny, kDemo, kRepro };

}  // namespace repro

#endif  // RMSNORM_REPRO_TRAIN_TASK_H_
