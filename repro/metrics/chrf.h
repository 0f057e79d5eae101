// Corpus chrF (Popović 2015) as sacreBLEU computes it by default: character n-grams of orders 1..6
// with whitespace removed, beta = 2, counts summed over the corpus, precision and recall each averaged
// over the orders that both sides have n-grams of, then one F-beta of the two averages.
#ifndef RMSNORM_REPRO_METRICS_CHRF_H_
#define RMSNORM_REPRO_METRICS_CHRF_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace repro {

constexpr int kChrfOrder = 6;
constexpr double kChrfBeta = 2.0;

// The counts chrF sums over a corpus, per order n = 1..6.
struct ChrfStats {
  std::array<int64_t, kChrfOrder> hypothesis{}, reference{}, matches{};
  ChrfStats& operator+=(const ChrfStats& other);
};

// One segment's counts over code points (UTF-8 decoded), ASCII whitespace removed.
ChrfStats chrf_segment_stats(const std::string& hypothesis, const std::string& reference);
// chrF in [0, 100] from corpus counts.
double chrf_score(const ChrfStats& corpus);
double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references);

}  // namespace repro

#endif  // RMSNORM_REPRO_METRICS_CHRF_H_
