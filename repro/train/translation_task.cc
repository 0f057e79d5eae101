// English to German translation with RNNSearch on the FreeDict example sentences: the paper's headline
// experiment (WMT14 En-De) at the scale of this machine. The metric is corpus BLEU on the test split
// (sacreBLEU's definition), with chrF beside it and a paired bootstrap against LayerNorm.
#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "common/rng.h"
#include "common/utf8.h"
#include "metrics/bleu.h"
#include "metrics/bootstrap.h"
#include "metrics/chrf.h"
#include "models/rnnsearch.h"
#include "train/tasks.h"

namespace repro {
namespace {

constexpr double kLn2 = 0.6931471805599453;
constexpr int32_t kUnknownToken = 2;  // a test character never seen in training
constexpr int32_t kFirstCharacter = 3;

// Characters as token ids: the code points of the training pairs (both languages), sorted, after the
// end, start and unknown tokens.
class CharVocabulary {
 public:
  explicit CharVocabulary(const std::vector<SentencePair>& train) {
    std::set<char32_t> seen;
    for (const SentencePair& p : train)
      for (const std::string* side : {&p.english, &p.german})
        for (char32_t c : utf8_decode(*side)) seen.insert(c);
    for (char32_t c : seen) {
      ids_[c] = kFirstCharacter + static_cast<int32_t>(chars_.size());
      chars_.push_back(c);
    }
  }
  int size() const { return kFirstCharacter + static_cast<int>(chars_.size()); }
  std::vector<int32_t> encode(const std::string& text) const {
    std::vector<int32_t> ids;
    for (char32_t c : utf8_decode(text)) {
      const auto found = ids_.find(c);
      ids.push_back(found == ids_.end() ? kUnknownToken : found->second);
    }
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const {
    std::u32string text;
    for (int32_t id : ids)
      if (id >= kFirstCharacter) text.push_back(chars_[id - kFirstCharacter]);
    return utf8_encode(text);
  }

 private:
  std::vector<char32_t> chars_;
  std::map<char32_t, int32_t> ids_;
};

struct EncodedPair {
  std::vector<int32_t> source, target;
  std::string reference;  // the German as text, for the metrics
};

// The task's data, prepared once and shared by its variants.
struct TranslationData {
  CharVocabulary vocab;
  std::vector<EncodedPair> train;  // sorted by length, so a batch of neighbours pads little
  std::vector<EncodedPair> test;   // in the split's order

  TranslationData(const ParallelCorpus& corpus, int max_source, int max_target) : vocab(corpus.train) {
    // Pairs that fit the model's buffers: sources of at most max_source characters, targets of at most
    // max_target - 1 (the end token takes a step).
    auto keep = [&](const std::vector<SentencePair>& pairs, std::vector<EncodedPair>& out) {
      for (const SentencePair& p : pairs) {
        EncodedPair e{vocab.encode(p.english), vocab.encode(p.german), p.german};
        if (static_cast<int>(e.source.size()) <= max_source && static_cast<int>(e.target.size()) < max_target)
          out.push_back(std::move(e));
      }
    };
    keep(corpus.train, train);
    keep(corpus.test, test);
    std::stable_sort(train.begin(), train.end(), [](const EncodedPair& a, const EncodedPair& b) {
      return std::make_pair(a.source.size(), a.target.size()) < std::make_pair(b.source.size(), b.target.size());
    });
  }
};

// Pairs [first, first + count) of `pairs` as a padded batch, with their targets or without.
TranslationBatch make_batch(const std::vector<EncodedPair>& pairs, size_t first, int count, bool with_targets) {
  std::vector<const std::vector<int32_t>*> sources, targets;
  for (size_t i = first; i < first + static_cast<size_t>(count); ++i) {
    sources.push_back(&pairs[i].source);
    if (with_targets) targets.push_back(&pairs[i].target);
  }
  return make_translation_batch(sources, targets);
}

class TranslationVariant : public Variant {
 public:
  TranslationVariant(const TranslationData& data, const RnnSearchConfig& config, const NormConfig& norm,
                     uint64_t seed)
      : data_(data), model_(config, norm, seed, &clock), seed_(seed), batch_(config.batch) {}

  // Batch `step`: B neighbours in the length-sorted training pairs, from a start drawn from (seed, step).
  double forward_backward(int64_t step) override {
    Rng rng = Rng::stream(seed_, static_cast<uint64_t>(step));
    const size_t first = rng.below(data_.train.size() - batch_ + 1);
    const double loss = model_.forward(make_batch(data_.train, first, batch_, /*with_targets=*/true));
    model_.backward();
    return loss / kLn2;
  }

  // BLEU on the test pairs, greedy decoding; chrF and the per-segment statistics are kept for later.
  double evaluate() override {
    std::vector<std::string> hypotheses;
    for (size_t first = 0; first < data_.test.size(); first += batch_) {
      const int count = static_cast<int>(std::min<size_t>(batch_, data_.test.size() - first));
      const TranslationBatch batch = make_batch(data_.test, first, count, /*with_targets=*/false);
      for (const std::vector<int32_t>& ids : model_.translate(batch, model_.config().max_target - 1))
        hypotheses.push_back(data_.vocab.decode(ids));
    }
    bleu_stats_.clear();
    ChrfStats chrf;
    BleuStats bleu;
    for (size_t i = 0; i < hypotheses.size(); ++i) {
      bleu_stats_.push_back(bleu_segment_stats(hypotheses[i], data_.test[i].reference));
      bleu += bleu_stats_.back();
      chrf += chrf_segment_stats(hypotheses[i], data_.test[i].reference);
    }
    chrf_ = chrf_score(chrf);
    hypotheses_ = std::move(hypotheses);
    return bleu_score(bleu);
  }

  double secondary_metric() const override { return chrf_; }
  std::vector<std::string> outputs() const override { return hypotheses_; }

  // Paired bootstrap of BLEU, 1000 resamples of the test segments.
  double p_value_against(const Variant& baseline) const override {
    const auto* other = dynamic_cast<const TranslationVariant*>(&baseline);
    if (other == nullptr || other->bleu_stats_.size() != bleu_stats_.size() || bleu_stats_.empty())
      return std::numeric_limits<double>::quiet_NaN();
    return paired_bootstrap(bleu_stats_, other->bleu_stats_, bleu_score, 1000).p_value;
  }

  std::vector<Param*> params() override { return model_.params(); }

 private:
  const TranslationData& data_;
  RnnSearch model_;
  uint64_t seed_;
  int batch_;
  std::vector<BleuStats> bleu_stats_;  // per test segment, from the last evaluate()
  std::vector<std::string> hypotheses_;
  double chrf_ = std::numeric_limits<double>::quiet_NaN();
};

class TranslationTask : public Task {
 public:
  TranslationTask(TaskInfo info, const ParallelCorpus& corpus, RnnSearchConfig config)
      : Task(std::move(info)), data_(corpus, config.max_source, config.max_target), config_(config) {
    config_.vocab = data_.vocab.size();
    describe(corpus);
  }
  std::unique_ptr<Variant> make_variant(const NormConfig& norm, uint64_t seed) override {
    return std::make_unique<TranslationVariant>(data_, config_, norm, seed);
  }
  std::vector<std::string> references() const override {
    std::vector<std::string> refs;
    for (const EncodedPair& p : data_.test) refs.push_back(p.reference);
    return refs;
  }

 private:
  // The model and data lines of the report, which need the vocabulary and the filtered sizes.
  void describe(const ParallelCorpus& corpus) {
    const RnnSearchConfig& c = config_;
    std::ostringstream m;
    m << "character level (" << c.vocab << " symbols), embedding " << c.embed << ", bidirectional GRU encoder "
      << c.encoder_hidden << "+" << c.encoder_hidden << ", bilinear attention, GRU decoder " << c.decoder_hidden
      << " fed [embedding; context], output from [state; context]; batch " << c.batch
      << " pairs of similar length; norm on the 4 pre-activations of every GRU step (encoder and decoder), each "
         "with its own gain and bias; greedy decoding";
    mutable_info().model = m.str();
    std::ostringstream d;
    d << "FreeDict eng-deu example sentences (Debian dict-freedict-eng-deu, GPL/AGPL): " << corpus.example_lines
      << " lines, deduplicated and split by English source into " << corpus.train.size() << " / "
      << corpus.valid.size() << " / " << corpus.test.size() << " train/valid/test pairs; kept: sources up to "
      << c.max_source << " and targets up to " << c.max_target - 1 << " characters (" << data_.train.size()
      << " train, " << data_.test.size() << " test pairs scored)";
    mutable_info().data = d.str();
  }

  TranslationData data_;
  RnnSearchConfig config_;
};

}  // namespace

std::unique_ptr<Task> make_translation_task(Scale scale, const ParallelCorpus& corpus) {
  // One model for demo and repro (they differ in steps); a toy one for the unit tests.
  RnnSearchConfig c;
  if (scale == Scale::kTiny)
    c.embed = 8, c.encoder_hidden = 8, c.decoder_hidden = 16, c.batch = 4, c.max_source = 24, c.max_target = 32;
  else
    c.embed = 32, c.encoder_hidden = 64, c.decoder_hidden = 128, c.batch = 32, c.max_source = 48, c.max_target = 64;
  TaskInfo info;
  info.steps = scale == Scale::kTiny ? 6 : scale == Scale::kDemo ? 600 : 2000;
  info.chunk = scale == Scale::kTiny ? 2 : 10;
  info.name = "rnnsearch-en-de";
  info.step_cost = 60;
  info.title = "RNNSearch English-German, character level, on the FreeDict example sentences";
  info.metric = "test BLEU";
  info.secondary_metric = "chrF";
  info.lower_is_better = false;
  info.loss_unit = "bits/char";
  info.partial = 0.0625f;
  info.adam.lr = 5e-3f;  // high, for a short run; the same for every norm
  info.adam.clip_norm = 1.0f;
  info.adam.warmup_steps = info.steps / 20;
  info.adam.total_steps = info.steps;
  return std::make_unique<TranslationTask>(info, corpus, c);
}

}  // namespace repro
