#include "train/tasks.h"

#include <algorithm>
#include <stdexcept>

namespace repro {

void Task::override_steps(int64_t steps) {
  const double ratio = static_cast<double>(steps) / static_cast<double>(info_.steps);
  info_.steps = steps;
  info_.chunk = std::max<int64_t>(1, std::min(info_.chunk, steps));
  info_.adam.warmup_steps = static_cast<int64_t>(static_cast<double>(info_.adam.warmup_steps) * ratio);
  info_.adam.total_steps = steps;
}

std::vector<std::string> task_names() { return {"gru-kjv", "transformer-kjv", "mlp-fashion", "rnnsearch-en-de"}; }

std::unique_ptr<Task> make_task(const std::string& name, Scale scale, Datasets& data) {
  if (name == "gru-kjv") return make_gru_task(scale, data.kjv());
  if (name == "transformer-kjv") return make_transformer_task(scale, data.kjv());
  if (name == "mlp-fashion") return make_mlp_task(scale, data.fashion_mnist());
  if (name == "rnnsearch-en-de") return make_translation_task(scale, data.freedict());
  throw std::invalid_argument("unknown task '" + name + "': use gru-kjv, transformer-kjv, mlp-fashion or rnnsearch-en-de");
}

}  // namespace repro
