// Model-level gradient checks: every model under every norm, the analytic gradient of the loss (our
// backward passes, the library's norm backward kernels inside) against central finite differences.
//
// The models compute in f32 (the library's kernels and OpenBLAS are f32), so the check is directional:
// for each parameter tensor p, a random unit direction v over p's entries, and
//     analytic  g . v    against    (L(p + h v) - L(p - h v)) / 2h,   Richardson-extrapolated over h, h/2.
// Moving a whole tensor at once makes the difference in L large against f32 rounding; a wrong term in
// any entry's gradient still shows, since v weighs every entry. The tolerance is a relative 1% plus an
// absolute floor of 1e-4 * |L|, above f32 rounding of the loss over 2h (~ 1e-7 * |L| / 2h).
// The step is the model's: the GRU and the Transformer take h = 1e-2, where the difference has
// converged and the f32 noise of the loss (which depends on the sgemm kernel OpenBLAS picks for the
// CPU) stays well below the floor; at 1e-3 that noise reached the floor with the Cooperlake and
// SkylakeX kernels. The MLP keeps h = 1e-3, small enough that its ReLU kinks are rarely crossed; the fixed
// inputs below cross none (a crossed kink shows as a few-percent error on one bias, whatever the norm).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "common/norm_layer.h"
#include "common/rng.h"
#include "models/gru_lm.h"
#include "models/mlp.h"
#include "models/rnnsearch.h"
#include "models/transformer_lm.h"
#include "rmsnorm/rmsnorm.hpp"

namespace repro {
namespace {

struct Case {
  std::string model;
  NormKind norm;
};

// How GoogleTest prints a Case (in ctest's test names too).
void PrintTo(const Case& c, std::ostream* os) { *os << c.model << " under " << norm_name(c.norm); }

std::string case_name(const testing::TestParamInfo<Case>& info) {
  return info.param.model + "_" + norm_name(info.param.norm);
}

// Checks every Param of a model. loss(): forward only; backward(): fills the grads of the last forward.
void check_gradients(const std::vector<Param*>& params, const std::function<double()>& loss,
                     const std::function<void()>& backward, double h) {
  const double base = loss();
  backward();
  std::vector<std::vector<float>> grads;
  for (const Param* p : params) grads.push_back(p->grad);

  Rng rng(1234);
  for (size_t i = 0; i < params.size(); ++i) {
    Param& p = *params[i];
    std::vector<double> v(p.size());
    double norm = 0.0;
    for (double& x : v) norm += (x = rng.normal()) * x;
    norm = std::sqrt(norm);
    double analytic = 0.0;
    for (int64_t j = 0; j < p.size(); ++j) analytic += grads[i][j] * (v[j] /= norm);

    const std::vector<float> saved = p.value;
    auto difference = [&](double step) {
      for (int64_t j = 0; j < p.size(); ++j) p.value[j] = static_cast<float>(saved[j] + step * v[j]);
      const double plus = loss();
      for (int64_t j = 0; j < p.size(); ++j) p.value[j] = static_cast<float>(saved[j] - step * v[j]);
      const double minus = loss();
      p.value = saved;
      return (plus - minus) / (2.0 * step);
    };
    const double d1 = difference(h), d2 = difference(h / 2);
    const double numeric = (4.0 * d2 - d1) / 3.0;  // cancels the h^2 term of the truncation error
    const double floor = 1e-4 * std::max(1.0, std::fabs(base));
    const double tolerance = 1e-2 * std::max(std::fabs(analytic), std::fabs(numeric)) + floor;
    EXPECT_NEAR(analytic, numeric, tolerance) << p.name << ": analytic " << analytic << ", finite difference "
                                              << numeric << " (h " << h << ", loss " << base << ")";
  }
}

// Gains start at 1 and biases at 0; move every gain and bias (the Params without weight decay) off
// those values, so the check also sees the terms that vanish there.
void perturb_norm_params(const std::vector<Param*>& params) {
  Rng rng(77);
  for (Param* p : params)
    if (!p->decay)
      for (float& v : p->value) v += static_cast<float>(0.1 * rng.normal());
}

NormConfig norm_config(NormKind kind) {
  NormConfig c;
  c.kind = kind;
  // p = 25% keeps 4 of the tiny models' 16 entries in the statistic: the partial path is exercised
  // without a one-entry statistic whose rstd would make the check ill-conditioned.
  c.partial = kind == NormKind::kPRmsNorm ? 0.25f : 1.0f;
  return c;
}

std::vector<int32_t> random_tokens(int batch, int seq_len, int vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> tokens(static_cast<size_t>(batch) * (seq_len + 1));
  for (int32_t& t : tokens) t = static_cast<int32_t>(rng.below(vocab));
  return tokens;
}

// Sentences of the given lengths, random characters 2 .. vocab-1: padded to the longest, so the check
// covers padded source positions and target rows without a loss.
TranslationBatch random_translation_batch(const RnnSearchConfig& config, const std::vector<int>& source_lengths,
                                          const std::vector<int>& target_lengths, uint64_t seed) {
  Rng rng(seed);
  auto sentence = [&](int length) {
    std::vector<int32_t> ids(static_cast<size_t>(length));
    for (int32_t& id : ids) id = static_cast<int32_t>(2 + rng.below(config.vocab - 2));
    return ids;
  };
  std::vector<std::vector<int32_t>> sources, targets;
  for (size_t b = 0; b < source_lengths.size(); ++b) {
    sources.push_back(sentence(source_lengths[b]));
    targets.push_back(sentence(target_lengths[b]));
  }
  std::vector<const std::vector<int32_t>*> source_ptrs, target_ptrs;
  for (size_t b = 0; b < sources.size(); ++b) source_ptrs.push_back(&sources[b]), target_ptrs.push_back(&targets[b]);
  return make_translation_batch(source_ptrs, target_ptrs);
}

class GradCheck : public testing::TestWithParam<Case> {
 protected:
  void SetUp() override { rmsnorm::set_backend(rmsnorm::Backend::kReference); }  // double accumulation
  void TearDown() override { rmsnorm::set_backend(rmsnorm::Backend::kAuto); }
};

TEST_P(GradCheck, MatchesFiniteDifferences) {
  const Case& c = GetParam();
  const NormConfig norm = norm_config(c.norm);
  if (c.model == "gru") {
    GruLmConfig config;
    config.vocab = 7, config.embed = 5, config.hidden = 16, config.batch = 3, config.seq_len = 5;
    GruLm model(config, norm, 42, nullptr);
    perturb_norm_params(model.params());
    const auto tokens = random_tokens(config.batch, config.seq_len, config.vocab, 7);
    check_gradients(model.params(), [&] { return model.forward(tokens.data()); }, [&] { model.backward(); }, 1e-2);
  } else if (c.model == "transformer") {
    TransformerLmConfig config;
    config.vocab = 7, config.channels = 16, config.heads = 2, config.layers = 2, config.batch = 2, config.seq_len = 5;
    TransformerLm model(config, norm, 42, nullptr);
    perturb_norm_params(model.params());
    const auto tokens = random_tokens(config.batch, config.seq_len, config.vocab, 7);
    check_gradients(model.params(), [&] { return model.forward(tokens.data()); }, [&] { model.backward(); }, 1e-2);
  } else if (c.model == "rnnsearch") {
    RnnSearchConfig config;
    config.vocab = 7, config.embed = 5, config.encoder_hidden = 8, config.decoder_hidden = 16, config.batch = 3;
    config.max_source = 5, config.max_target = 4;
    RnnSearch model(config, norm, 42, nullptr);
    perturb_norm_params(model.params());
    const TranslationBatch batch = random_translation_batch(config, /*source_lengths=*/{5, 3, 4},
                                                            /*target_lengths=*/{3, 2, 1}, 9);
    check_gradients(model.params(), [&] { return model.forward(batch); }, [&] { model.backward(); }, 1e-2);
  } else {
    MlpConfig config;
    config.inputs = 12, config.hidden = 16, config.classes = 5, config.batch = 6;
    Mlp model(config, norm, 42, nullptr);
    perturb_norm_params(model.params());
    Rng rng(11);  // inputs whose pre-activations sit off the ReLU kinks for h = 1e-3
    std::vector<float> x(static_cast<size_t>(config.batch) * config.inputs);
    for (float& v : x) v = static_cast<float>(rng.normal());
    std::vector<int32_t> labels(config.batch);
    for (int32_t& l : labels) l = static_cast<int32_t>(rng.below(config.classes));
    check_gradients(model.params(), [&] { return model.forward(x.data(), labels.data(), config.batch); },
                    [&] { model.backward(); }, 1e-3);
  }
}

std::vector<Case> all_cases() {
  std::vector<Case> cases;
  for (const char* model : {"gru", "transformer", "mlp", "rnnsearch"})
    for (NormKind norm : all_norms()) cases.push_back({model, norm});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, GradCheck, testing::ValuesIn(all_cases()), case_name);

}  // namespace
}  // namespace repro
