// Corpus BLEU as sacreBLEU computes it by default (Post 2018): the mteval-v13a tokenizer ("13a"), one
// reference per segment, n-grams up to 4, the brevity penalty over the whole corpus, and the "exp"
// smoothing of mteval (a zero n-gram match count becomes 1/2^k of a match, k counting such orders).
#ifndef RMSNORM_REPRO_METRICS_BLEU_H_
#define RMSNORM_REPRO_METRICS_BLEU_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace repro {

// sacreBLEU's 13a tokenization of one segment: drop "<skipped>", join "-\n" hyphenations, unescape
// &quot; &amp; &lt; &gt;, put spaces around ASCII punctuation (periods and commas only where not
// between digits, dashes after digits), and collapse whitespace. Whitespace here is ASCII whitespace;
// Python's str.split() would also split at Unicode spaces such as U+00A0.
std::string tokenize_13a(const std::string& segment);

// The counts BLEU sums over a corpus.
struct BleuStats {
  std::array<int64_t, 4> matches{};  // clipped n-gram matches, n = 1..4
  std::array<int64_t, 4> ngrams{};   // hypothesis n-grams, n = 1..4
  int64_t hypothesis_length = 0, reference_length = 0;  // in tokens
  BleuStats& operator+=(const BleuStats& other);
};

// One segment's counts, both sides tokenized with 13a here.
BleuStats bleu_segment_stats(const std::string& hypothesis, const std::string& reference);
// BLEU in [0, 100] from corpus counts.
double bleu_score(const BleuStats& corpus);
double corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

}  // namespace repro

#endif  // RMSNORM_REPRO_METRICS_BLEU_H_
