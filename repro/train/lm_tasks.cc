// The two character-level language-modelling tasks on the KJV Bible: the GRU and the Transformer
// share the data pipeline and the metric, bits per character on the held-out last 10% of the text.
#include <cmath>
#include <sstream>

#include "common/rng.h"
#include "models/gru_lm.h"
#include "models/transformer_lm.h"
#include "train/tasks.h"

namespace repro {
namespace {

constexpr double kLn2 = 0.6931471805599453;

template <class Model>
class LmVariant : public Variant {
 public:
  template <class Config>
  LmVariant(const CharCorpus& corpus, const Config& config, const NormConfig& norm, uint64_t seed,
            int64_t eval_windows)
      : corpus_(corpus),
        model_(config, norm, seed, &clock),
        seed_(seed),
        batch_(config.batch),
        seq_len_(config.seq_len),
        eval_windows_(eval_windows),
        tokens_(int64_t{config.batch} * (config.seq_len + 1)) {}

  // Batch `step`: B windows of T + 1 characters at offsets drawn from (seed, step) alone.
  double forward_backward(int64_t step) override {
    Rng rng = Rng::stream(seed_, static_cast<uint64_t>(step));
    const uint64_t starts = corpus_.train.size() - seq_len_ - 1;
    for (int b = 0; b < batch_; ++b) {
      const int32_t* window = &corpus_.train[rng.below(starts)];
      std::copy(window, window + seq_len_ + 1, &tokens_[int64_t{b} * (seq_len_ + 1)]);
    }
    const double loss = model_.forward(tokens_.data());
    model_.backward();
    return loss / kLn2;
  }

  // Bits per character over the first eval_windows non-overlapping windows of the validation text
  // (each predicts T characters from a fresh state; a whole number of batches).
  double evaluate() override {
    const int64_t available = static_cast<int64_t>(corpus_.valid.size() - 1) / seq_len_;
    const int64_t batches = std::min(available, eval_windows_) / batch_;
    double nats = 0.0;
    for (int64_t i = 0; i < batches; ++i) {
      for (int b = 0; b < batch_; ++b) {
        const int32_t* window = &corpus_.valid[(i * batch_ + b) * seq_len_];
        std::copy(window, window + seq_len_ + 1, &tokens_[int64_t{b} * (seq_len_ + 1)]);
      }
      nats += model_.forward(tokens_.data());
    }
    return nats / static_cast<double>(batches) / kLn2;
  }

  std::vector<Param*> params() override { return model_.params(); }

 private:
  const CharCorpus& corpus_;
  Model model_;
  uint64_t seed_;
  int batch_, seq_len_;
  int64_t eval_windows_;
  std::vector<int32_t> tokens_;  // (B, T + 1)
};

template <class Model, class Config>
class LmTask : public Task {
 public:
  LmTask(TaskInfo info, const CharCorpus& corpus, const Config& config, int64_t eval_windows)
      : Task(std::move(info)), corpus_(corpus), config_(config), eval_windows_(eval_windows) {}
  std::unique_ptr<Variant> make_variant(const NormConfig& norm, uint64_t seed) override {
    return std::make_unique<LmVariant<Model>>(corpus_, config_, norm, seed, eval_windows_);
  }

 private:
  const CharCorpus& corpus_;
  Config config_;
  int64_t eval_windows_;
};

std::string kjv_data_line(const CharCorpus& corpus, int64_t eval_windows, int seq_len) {
  std::ostringstream s;
  const int64_t windows = std::min<int64_t>(eval_windows, static_cast<int64_t>(corpus.valid.size() - 1) / seq_len);
  s << "KJV Bible (Debian bible-kjv), one verse per line, a vocabulary of " << corpus.vocab_size()
    << " characters; train: first 90% ("
    << corpus.train.size() << " chars), valid: last 10% (" << corpus.valid.size() << " chars), evaluated on its first "
    << windows * seq_len << " characters";
  return s.str();
}

}  // namespace

std::unique_ptr<Task> make_gru_task(Scale scale, const CharCorpus& corpus) {
  GruLmConfig c;
  c.vocab = corpus.vocab_size();
  TaskInfo info;
  // Model sizes per scale. Demo and repro share the model (hidden 128: the norm is a realistic share of a
  // small GRU's step) and differ in steps and in how much validation text is scored.
  struct Preset {
    int embed, hidden, batch, seq_len;
    int64_t steps, chunk, eval_windows;
  };
  const Preset preset = scale == Scale::kTiny   ? Preset{8, 16, 4, 8, 6, 2, 8}
                        : scale == Scale::kDemo ? Preset{64, 128, 32, 64, 500, 10, 1024}
                                                : Preset{64, 128, 32, 64, 1200, 10, 4096};
  c.embed = preset.embed;
  c.hidden = preset.hidden;
  c.batch = preset.batch;
  c.seq_len = preset.seq_len;
  info.steps = preset.steps;
  info.chunk = preset.chunk;
  const int64_t eval_windows = preset.eval_windows;
  info.name = "gru-kjv";
  info.step_cost = 46;
  info.title = "GRU character LM on the KJV Bible (the paper's RNNSearch GRU)";
  std::ostringstream m;
  m << "embedding " << c.embed << ", 1-layer GRU with " << c.hidden << " units, batch " << c.batch << " x " << c.seq_len
    << " characters (BPTT from a zero state); norm on the 4 pre-activations of every step (x W_xg, x W_xc, h U_g, "
       "h U_c before the reset gate), each with its own gain and bias";
  info.model = m.str();
  info.data = kjv_data_line(corpus, eval_windows, c.seq_len);
  info.metric = "valid bpc";
  info.lower_is_better = true;
  info.loss_unit = "bits/char";
  info.partial = 0.0625f;
  info.adam.lr = 5e-3f;  // high, for a short run; the same for every norm
  info.adam.clip_norm = 1.0f;
  info.adam.warmup_steps = info.steps / 20;
  info.adam.total_steps = info.steps;
  return std::make_unique<LmTask<GruLm, GruLmConfig>>(info, corpus, c, eval_windows);
}

std::unique_ptr<Task> make_transformer_task(Scale scale, const CharCorpus& corpus) {
  TransformerLmConfig c;
  c.vocab = corpus.vocab_size();
  TaskInfo info;
  // Model sizes per scale: 64 channels keep a 2-layer model trainable in the demo's minutes.
  struct Preset {
    int channels, heads, layers, batch, seq_len;
    int64_t steps, chunk, eval_windows;
  };
  const Preset preset = scale == Scale::kTiny   ? Preset{16, 2, 2, 4, 8, 6, 2, 8}
                        : scale == Scale::kDemo ? Preset{64, 4, 2, 16, 64, 800, 10, 1024}
                                                : Preset{64, 4, 2, 16, 64, 1600, 10, 4096};
  c.channels = preset.channels;
  c.heads = preset.heads;
  c.layers = preset.layers;
  c.batch = preset.batch;
  c.seq_len = preset.seq_len;
  info.steps = preset.steps;
  info.chunk = preset.chunk;
  const int64_t eval_windows = preset.eval_windows;
  info.name = "transformer-kjv";
  info.step_cost = 36;
  info.title = "Post-norm Transformer character LM on the KJV Bible";
  std::ostringstream m;
  m << c.layers << " layers, " << c.channels << " channels, " << c.heads << " heads, GELU FFN " << 4 * c.channels
    << " wide, causal, learned positions, batch " << c.batch << " x " << c.seq_len
    << " characters; post-norm: x = N(x + Attention(x)), x = N(x + FFN(x)), gain and bias";
  info.model = m.str();
  info.data = kjv_data_line(corpus, eval_windows, c.seq_len);
  info.metric = "valid bpc";
  info.lower_is_better = true;
  info.loss_unit = "bits/char";
  info.partial = 0.0625f;
  info.adam.lr = 1e-2f;  // high, for a short run; the same for every norm
  info.adam.clip_norm = 1.0f;
  info.adam.warmup_steps = info.steps / 10;
  info.adam.total_steps = info.steps;
  return std::make_unique<LmTask<TransformerLm, TransformerLmConfig>>(info, corpus, c, eval_windows);
}

}  // namespace repro
