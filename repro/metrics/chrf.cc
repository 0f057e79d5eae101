#include "metrics/chrf.h"

#include <algorithm>
#include <map>
#include <stdexcept>

#include "common/utf8.h"

namespace repro {
namespace {

std::u32string without_whitespace(const std::string& text) {
  std::u32string out;
  for (char32_t c : utf8_decode(text))
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f') out.push_back(c);
  return out;
}

std::map<std::u32string, int64_t> count_ngrams(const std::u32string& chars, size_t n) {
  std::map<std::u32string, int64_t> counts;
  for (size_t start = 0; start + n <= chars.size(); ++start) ++counts[chars.substr(start, n)];
  return counts;
}

}  // namespace

ChrfStats& ChrfStats::operator+=(const ChrfStats& other) {
  for (int n = 0; n < kChrfOrder; ++n) {
    hypothesis[n] += other.hypothesis[n];
    reference[n] += other.reference[n];
    matches[n] += other.matches[n];
  }
  return *this;
}

ChrfStats chrf_segment_stats(const std::string& hypothesis, const std::string& reference) {
  const std::u32string hyp = without_whitespace(hypothesis), ref = without_whitespace(reference);
  ChrfStats stats;
  for (int n = 0; n < kChrfOrder; ++n) {
    const auto hyp_counts = count_ngrams(hyp, static_cast<size_t>(n) + 1);
    const auto ref_counts = count_ngrams(ref, static_cast<size_t>(n) + 1);
    stats.hypothesis[n] = std::max<int64_t>(0, static_cast<int64_t>(hyp.size()) - n);
    stats.reference[n] = std::max<int64_t>(0, static_cast<int64_t>(ref.size()) - n);
    for (const auto& [gram, count] : hyp_counts) {
      const auto found = ref_counts.find(gram);
      if (found != ref_counts.end()) stats.matches[n] += std::min(count, found->second);
    }
  }
  return stats;
}

double chrf_score(const ChrfStats& s) {
  double precision = 0.0, recall = 0.0;
  int orders = 0;
  for (int n = 0; n < kChrfOrder; ++n) {
    if (s.hypothesis[n] == 0 || s.reference[n] == 0) continue;
    precision += static_cast<double>(s.matches[n]) / static_cast<double>(s.hypothesis[n]);
    recall += static_cast<double>(s.matches[n]) / static_cast<double>(s.reference[n]);
    ++orders;
  }
  if (orders == 0) return 0.0;
  precision /= orders;
  recall /= orders;
  if (precision + recall == 0.0) return 0.0;
  const double b2 = kChrfBeta * kChrfBeta;
  return 100.0 * (1.0 + b2) * precision * recall / (b2 * precision + recall);
}

double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  if (hypotheses.size() != references.size()) throw std::invalid_argument("corpus_chrf: one reference per hypothesis");
  ChrfStats total;
  for (size_t i = 0; i < hypotheses.size(); ++i) total += chrf_segment_stats(hypotheses[i], references[i]);
  return chrf_score(total);
}

}  // namespace repro
