// Fashion-MNIST classification with an MLP: the stand-in for the paper's CIFAR-10 experiment. The
// metric is the error on the 10,000 test images after training on the 60,000 training images.
#include <algorithm>
#include <numeric>
#include <sstream>

#include "common/rng.h"
#include "models/mlp.h"
#include "train/tasks.h"

namespace repro {
namespace {

class MlpVariant : public Variant {
 public:
  MlpVariant(const FashionMnist& data, const MlpConfig& config, const NormConfig& norm, uint64_t seed)
      : data_(data),
        model_(config, norm, seed, &clock),
        seed_(seed),
        batch_(config.batch),
        images_(int64_t{config.batch} * data.train.pixels),
        labels_(config.batch) {}

  // Batch `step` takes the next B images of an epoch-wise shuffle drawn from (seed, epoch).
  double forward_backward(int64_t step) override {
    const int64_t n = data_.train.count, pixels = data_.train.pixels;
    for (int b = 0; b < batch_; ++b) {
      const int64_t i = step * batch_ + b;
      const int64_t image = shuffled(i / n)[i % n];
      std::copy_n(&data_.train.images[image * pixels], pixels, &images_[b * pixels]);
      labels_[b] = data_.train.labels[image];
    }
    const double loss = model_.forward(images_.data(), labels_.data(), batch_);
    model_.backward();
    return loss;
  }

  // Test error in percent over all 10,000 test images.
  double evaluate() override {
    const ImageSet& test = data_.test;
    int64_t errors = 0;
    for (int64_t first = 0; first < test.count; first += batch_) {
      const int64_t rows = std::min<int64_t>(batch_, test.count - first);
      int64_t batch_errors = 0;
      model_.forward(&test.images[first * test.pixels], &test.labels[first], rows, &batch_errors);
      errors += batch_errors;
    }
    return 100.0 * static_cast<double>(errors) / static_cast<double>(test.count);
  }

  std::vector<Param*> params() override { return model_.params(); }

 private:
  // The order of the training images in `epoch` (Fisher-Yates from the seed and the epoch).
  const std::vector<int64_t>& shuffled(int64_t epoch) {
    if (epoch != order_epoch_) {
      order_.resize(data_.train.count);
      std::iota(order_.begin(), order_.end(), 0);
      Rng rng = Rng::stream(seed_, static_cast<uint64_t>(epoch));
      for (int64_t i = static_cast<int64_t>(order_.size()) - 1; i > 0; --i)
        std::swap(order_[i], order_[rng.below(static_cast<uint64_t>(i) + 1)]);
      order_epoch_ = epoch;
    }
    return order_;
  }

  const FashionMnist& data_;
  Mlp model_;
  uint64_t seed_;
  int batch_;
  std::vector<float> images_;    // (B, 784)
  std::vector<int32_t> labels_;  // (B)
  std::vector<int64_t> order_;
  int64_t order_epoch_ = -1;
};

class MlpTask : public Task {
 public:
  MlpTask(TaskInfo info, const FashionMnist& data, const MlpConfig& config)
      : Task(std::move(info)), data_(data), config_(config) {}
  std::unique_ptr<Variant> make_variant(const NormConfig& norm, uint64_t seed) override {
    return std::make_unique<MlpVariant>(data_, config_, norm, seed);
  }

 private:
  const FashionMnist& data_;
  MlpConfig config_;
};

}  // namespace

std::unique_ptr<Task> make_mlp_task(Scale scale, const FashionMnist& data) {
  MlpConfig c;
  c.inputs = static_cast<int>(data.train.pixels);
  c.classes = FashionMnist::kClasses;
  TaskInfo info;
  switch (scale) {
    case Scale::kTiny:
      c.hidden = 16;
      c.batch = 8;
      info.steps = 6;
      info.chunk = 2;
      break;
    case Scale::kDemo:
      c.hidden = 256;
      c.batch = 128;
      info.steps = 2000;
      info.chunk = 25;
      break;
    case Scale::kRepro:
      c.hidden = 256;
      c.batch = 128;
      info.steps = 3000;  // 6.4 epochs
      info.chunk = 25;
      break;
  }
  info.name = "mlp-fashion";
  info.step_cost = 7;
  info.title = "MLP on Fashion-MNIST (stand-in for the paper's CIFAR-10 ConvPool-CNN-C)";
  std::ostringstream m;
  m << c.inputs << "-" << c.hidden << "-" << c.hidden << "-" << c.classes << " MLP, ReLU, batch " << c.batch
    << "; norm on each hidden layer's summed inputs before the ReLU (y = relu(N(x W))), gain and bias";
  info.model = m.str();
  std::ostringstream d;
  d << "Fashion-MNIST (Debian dataset-fashion-mnist): train on " << data.train.count << " images ("
    << static_cast<double>(info.steps * c.batch) / static_cast<double>(data.train.count)
    << " epochs), test error on the " << data.test.count << " test images";
  info.data = d.str();
  info.metric = "test error %";
  info.lower_is_better = true;
  info.loss_unit = "nats";
  info.partial = 0.125f;  // the paper's p for its image experiment
  info.adam.lr = 1e-3f;
  info.adam.weight_decay = 0.0f;
  info.adam.warmup_steps = info.steps / 50;
  info.adam.total_steps = info.steps;
  return std::make_unique<MlpTask>(info, data, c);
}

}  // namespace repro
