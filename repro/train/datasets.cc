#include "train/datasets.h"

namespace repro {

const CharCorpus& Datasets::kjv() {
  if (!kjv_) kjv_ = std::make_unique<CharCorpus>(make_char_corpus(load_kjv_text(kjv_source_)));
  return *kjv_;
}

const FashionMnist& Datasets::fashion_mnist() {
  if (!fashion_mnist_) fashion_mnist_ = std::make_unique<FashionMnist>(load_fashion_mnist(fashion_mnist_dir_));
  return *fashion_mnist_;
}

const ParallelCorpus& Datasets::freedict() {
  if (!freedict_) freedict_ = std::make_unique<ParallelCorpus>(load_freedict_eng_deu(freedict_path_));
  return *freedict_;
}

}  // namespace repro
