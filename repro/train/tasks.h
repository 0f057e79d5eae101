// The paper's three experiments as tasks, at a given scale:
//   gru-kjv          GRU character LM on the KJV Bible (the paper's RNNSearch GRU)   valid bits/char
//   transformer-kjv  post-norm Transformer character LM on the KJV Bible             valid bits/char
//   mlp-fashion      MLP on Fashion-MNIST (stand-in for the paper's CIFAR-10 CNN)    test error %
//   rnnsearch-en-de  RNNSearch English-German on FreeDict's example sentences          test BLEU (and chrF)
#ifndef RMSNORM_REPRO_TRAIN_TASKS_H_
#define RMSNORM_REPRO_TRAIN_TASKS_H_

#include <memory>
#include <string>
#include <vector>

#include "train/datasets.h"
#include "train/task.h"

namespace repro {

std::vector<std::string> task_names();
// Throws std::invalid_argument for an unknown name, MissingData when the task's data is not installed.
std::unique_ptr<Task> make_task(const std::string& name, Scale scale, Datasets& data);

std::unique_ptr<Task> make_gru_task(Scale scale, const CharCorpus& corpus);
std::unique_ptr<Task> make_transformer_task(Scale scale, const CharCorpus& corpus);
std::unique_ptr<Task> make_mlp_task(Scale scale, const FashionMnist& data);
std::unique_ptr<Task> make_translation_task(Scale scale, const ParallelCorpus& corpus);

}  // namespace repro

#endif  // RMSNORM_REPRO_TRAIN_TASKS_H_
