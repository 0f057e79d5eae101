// Paired bootstrap resampling (Koehn 2004) for the difference of a corpus metric between two systems
// that translated the same test segments, with the p-value sacreBLEU's --paired-bs reports (after Moses'
// bootstrap-hypothesis-difference-significance.pl).
#ifndef RMSNORM_REPRO_METRICS_BOOTSTRAP_H_
#define RMSNORM_REPRO_METRICS_BOOTSTRAP_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "common/rng.h"

namespace repro {

struct BootstrapResult {
  double difference = 0.0;  // score(a) - score(b) on the whole test set
  double p_value = 1.0;     // how often chance alone gives an absolute difference this large
  bool significant(double level = 0.05) const { return p_value < level; }
};

// a, b: per-segment statistics (BleuStats, ChrfStats: anything with += and a score function), segment i
// of a and of b translating the same source. Each of `samples` resamples draws as many segments with
// replacement (the same draw for both systems) and takes the absolute difference of the scores of the
// summed statistics. Centred on their mean, these differences show how far chance moves the difference;
// p = (1 + the number of centred differences above |difference|) / (samples + 1), as in sacreBLEU.
// Systems that tie on the whole set get p = 1 (sacreBLEU would report 1 / (samples + 1)).
template <class Stats, class Score>
BootstrapResult paired_bootstrap(const std::vector<Stats>& a, const std::vector<Stats>& b, Score score,
                                 int samples = 1000, uint64_t seed = 12345) {
  auto total = [&](const std::vector<Stats>& segments) {
    Stats sum{};
    for (const Stats& s : segments) sum += s;
    return score(sum);
  };
  BootstrapResult result;
  result.difference = total(a) - total(b);
  if (result.difference == 0.0 || a.empty()) return result;
  Rng rng(seed);
  std::vector<double> differences(static_cast<size_t>(samples));
  double mean = 0.0;
  for (double& d : differences) {
    Stats sum_a{}, sum_b{};
    for (size_t i = 0; i < a.size(); ++i) {
      const size_t pick = rng.below(a.size());
      sum_a += a[pick];
      sum_b += b[pick];
    }
    d = std::fabs(score(sum_a) - score(sum_b));
    mean += d / samples;
  }
  int above = 0;
  for (double d : differences) above += d - mean > std::fabs(result.difference);
  result.p_value = (above + 1.0) / (samples + 1.0);
  return result;
}

}  // namespace repro

#endif  // RMSNORM_REPRO_METRICS_BOOTSTRAP_H_
