// The translation metrics on cases worked out by hand (sacreBLEU itself checks them in
// python/tests/test_translation_metrics.py), and the paired bootstrap's p-values.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/utf8.h"
#include "metrics/bleu.h"
#include "metrics/bootstrap.h"
#include "metrics/chrf.h"

namespace repro {
namespace {

TEST(Metrics, Tokenize13a) {
  EXPECT_EQ(tokenize_13a("Hallo, Welt!"), "Hallo , Welt !");
  EXPECT_EQ(tokenize_13a("1,000.50 and 3.5."), "1,000.50 and 3.5 .");  // no split between digits
  EXPECT_EQ(tokenize_13a("10-11 well-known"), "10 - 11 well-known");  // a dash splits after a digit only
  EXPECT_EQ(tokenize_13a("Tom &amp; Jerry <skipped>(x)"), "Tom & Jerry ( x )");
  EXPECT_EQ(tokenize_13a("  Größe.  "), "Größe .");
}

TEST(Metrics, BleuByHand) {
  EXPECT_DOUBLE_EQ(corpus_bleu({"a b c d e"}, {"a b c d e"}), 100.0);
  EXPECT_EQ(corpus_bleu({"x y z w"}, {"a b c d"}), 0.0);
  // 4 of 5 unigrams, 3 of 4 bigrams, 2 of 3 trigrams, 1 of 2 4-grams; same length: no brevity penalty.
  const double expected = 100.0 * std::pow(0.8 * 0.75 * (2.0 / 3.0) * 0.5, 0.25);
  EXPECT_NEAR(corpus_bleu({"a b c d x"}, {"a b c d e"}), expected, 1e-9);
  // A hypothesis half as long: brevity penalty exp(1 - 2).
  EXPECT_NEAR(corpus_bleu({"a b c d"}, {"a b c d e f g h"}), 100.0 * std::exp(-1.0), 1e-9);
}

TEST(Metrics, ChrfByHand) {
  EXPECT_DOUBLE_EQ(corpus_chrf({"Größe"}, {"Größe"}), 100.0);
  EXPECT_DOUBLE_EQ(corpus_chrf({"ab c"}, {"abc"}), 100.0);  // whitespace is ignored
  EXPECT_EQ(corpus_chrf({"xyz"}, {"abc"}), 0.0);
  // "ab" against "abc": precision 1 for orders 1 and 2; recall 2/3 and 1/2; order 3 has no hypothesis
  // n-gram and is left out of both averages.
  const double p = 1.0, r = (2.0 / 3.0 + 0.5) / 2.0;
  EXPECT_NEAR(corpus_chrf({"ab"}, {"abc"}), 100.0 * 5.0 * p * r / (4.0 * p + r), 1e-9);
}

TEST(Metrics, Utf8RoundTrip) {
  const std::string text = "Änderung – „Maß“ 😀";
  const std::u32string chars = utf8_decode(text);
  EXPECT_EQ(chars.size(), 18u);
  EXPECT_EQ(utf8_encode(chars), text);
  EXPECT_EQ(utf8_decode("\xff" "a").size(), 2u);  // a stray byte is one character, not an error
}

std::vector<BleuStats> segment_stats(const std::vector<std::string>& hyps, const std::vector<std::string>& refs) {
  std::vector<BleuStats> stats;
  for (size_t i = 0; i < hyps.size(); ++i) stats.push_back(bleu_segment_stats(hyps[i], refs[i]));
  return stats;
}

TEST(Metrics, PairedBootstrap) {
  std::vector<std::string> refs, good, bad;
  for (int i = 0; i < 100; ++i) {
    const std::string n = std::to_string(i);
    refs.push_back("the cat " + n + " sat on the mat today");
    good.push_back(i % 10 == 0 ? "a dog ran" : "the cat " + n + " sat on the mat today");
    bad.push_back(i % 2 == 0 ? "a dog ran" : "the cat " + n + " sat on the mat today");
  }
  const auto good_stats = segment_stats(good, refs), bad_stats = segment_stats(bad, refs);
  const BootstrapResult clear = paired_bootstrap(good_stats, bad_stats, bleu_score);
  EXPECT_GT(clear.difference, 10.0);
  EXPECT_LT(clear.p_value, 0.01);
  EXPECT_TRUE(clear.significant());
  const BootstrapResult same = paired_bootstrap(good_stats, good_stats, bleu_score);
  EXPECT_EQ(same.p_value, 1.0);
  EXPECT_FALSE(same.significant());
  // One segment of difference in 100 is within the resampling noise.
  std::vector<std::string> almost = good;
  almost[1] = "a dog ran";
  const BootstrapResult close = paired_bootstrap(good_stats, segment_stats(almost, refs), bleu_score);
  EXPECT_GT(close.difference, 0.0);
  EXPECT_GT(close.p_value, 0.05);
}

}  // namespace
}  // namespace repro
