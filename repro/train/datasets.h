// The data sets the tasks train on, loaded once per process on first use and shared by the tasks.
#ifndef RMSNORM_REPRO_TRAIN_DATASETS_H_
#define RMSNORM_REPRO_TRAIN_DATASETS_H_

#include <memory>
#include <string>

#include "data/fashion_mnist.h"
#include "data/freedict.h"
#include "data/kjv.h"

namespace repro {

class Datasets {
 public:
  Datasets(KjvSource kjv, std::string fashion_mnist_dir, std::string freedict_path = kFreedictPath)
      : kjv_source_(std::move(kjv)),
        fashion_mnist_dir_(std::move(fashion_mnist_dir)),
        freedict_path_(std::move(freedict_path)) {}
  // Throw MissingData naming the Debian package when the data is not installed.
  const CharCorpus& kjv();
  const FashionMnist& fashion_mnist();
  const ParallelCorpus& freedict();

 private:
  KjvSource kjv_source_;
  std::string fashion_mnist_dir_;
  std::string freedict_path_;
  std::unique_ptr<CharCorpus> kjv_;
  std::unique_ptr<FashionMnist> fashion_mnist_;
  std::unique_ptr<ParallelCorpus> freedict_;
};

}  // namespace repro

#endif  // RMSNORM_REPRO_TRAIN_DATASETS_H_
