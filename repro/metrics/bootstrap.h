// Paired bootstrap resampling (Koehn 2004) for the difference of a corpus metric between two systems
// that translated the same test segments.
#ifndef RMSNORM_REPRO_METRICS_BOOTSTRAP_H_
#define RMSNORM_REPRO_METRICS_BOOTSTRAP_H_

#include <cstdint>
#include <vector>

#include "common/rng.h"

namespace repro {

struct BootstrapResult {
  double difference = 0.0;  // score(a) - score(b) on the whole test set
  double p_value = 1.0;     // share of resamples whose difference is not of the observed sign
  bool significant(double level = 0.05) const { return p_value < level; }
};

// a, b: per-segment statistics (BleuStats, ChrfStats: anything with += and a score function), segment i
// of a and of b translating the same source. Each of `samples` resamples draws as many segments with
// replacement (the same draw for both systems) and scores the summed statistics. One-sided in the
// direction observed: p is the share of resamples where the difference is zero or of the other sign
// (p = 1 when the systems tie on the whole set).
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
  int against = 0;
  for (int sample = 0; sample < samples; ++sample) {
    Stats sum_a{}, sum_b{};
    for (size_t i = 0; i < a.size(); ++i) {
      const size_t pick = rng.below(a.size());
      sum_a += a[pick];
      sum_b += b[pick];
    }
    const double d = score(sum_a) - score(sum_b);
    if (result.difference > 0.0 ? d <= 0.0 : d >= 0.0) ++against;
  }
  result.p_value = static_cast<double>(against) / samples;
  return result;
}

}  // namespace repro

#endif  // RMSNORM_REPRO_METRICS_BOOTSTRAP_H_
