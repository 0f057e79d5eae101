#include "metrics/bleu.h"

#include <cmath>
#include <map>
#include <stdexcept>

namespace repro {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

// The ASCII punctuation 13a always splits off: all of it but the apostrophe, comma, hyphen and period.
bool is_split_punctuation(char c) {
  const unsigned char u = static_cast<unsigned char>(c);
  return (u >= '{' && u <= '~') || (u >= '[' && u <= '`') || (u >= ' ' && u <= '&') || (u >= '(' && u <= '+') ||
         (u >= ':' && u <= '@') || u == '/';
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
}

// One pass of a two-character rewrite rule, left to right without overlaps, as Python's re.sub does for
// the patterns ([^0-9])([.,]), ([.,])([^0-9]) and ([0-9])(-). Bytes of multi-byte UTF-8 characters are
// never digits, periods, commas or hyphens, so working on bytes gives the same result as on characters.
template <class First, class Second>
std::string rewrite_pairs(const std::string& s, First first, Second second, const char* before, const char* between,
                          const char* after) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (i + 1 < s.size() && first(s[i]) && second(s[i + 1])) {
      out += before;
      out += s[i];
      out += between;
      out += s[i + 1];
      out += after;
      i += 2;
    } else {
      out += s[i++];
    }
  }
  return out;
}

std::vector<std::string> split_whitespace(const std::string& s) {
  std::vector<std::string> words;
  std::string word;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
      if (!word.empty()) words.push_back(word), word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(word);
  return words;
}

// Counts of the n-grams (n = 1..4) of a token sequence, keyed by the tokens joined with spaces.
std::array<std::map<std::string, int64_t>, 4> count_ngrams(const std::vector<std::string>& tokens) {
  std::array<std::map<std::string, int64_t>, 4> counts;
  for (size_t start = 0; start < tokens.size(); ++start) {
    std::string gram;
    for (size_t n = 0; n < 4 && start + n < tokens.size(); ++n) {
      if (n > 0) gram += ' ';
      gram += tokens[start + n];
      ++counts[n][gram];
    }
  }
  return counts;
}

}  // namespace

std::string tokenize_13a(const std::string& segment) {
  std::string line = segment;
  replace_all(line, "<skipped>", "");
  replace_all(line, "-\n", "");
  replace_all(line, "\n", " ");
  if (line.find('&') != std::string::npos) {
    replace_all(line, "&quot;", "\"");
    replace_all(line, "&amp;", "&");
    replace_all(line, "&lt;", "<");
    replace_all(line, "&gt;", ">");
  }
  std::string spaced = " ";
  for (char c : line) {
    if (is_split_punctuation(c)) {
      spaced += ' ';
      spaced += c;
      spaced += ' ';
    } else {
      spaced += c;
    }
  }
  spaced += ' ';
  auto period_or_comma = [](char c) { return c == '.' || c == ','; };
  auto not_digit = [](char c) { return !is_digit(c); };
  spaced = rewrite_pairs(spaced, not_digit, period_or_comma, "", " ", " ");
  spaced = rewrite_pairs(spaced, period_or_comma, not_digit, " ", " ", "");
  spaced = rewrite_pairs(spaced, is_digit, [](char c) { return c == '-'; }, "", " ", " ");
  std::string joined;
  for (const std::string& word : split_whitespace(spaced)) {
    if (!joined.empty()) joined += ' ';
    joined += word;
  }
  return joined;
}

BleuStats& BleuStats::operator+=(const BleuStats& other) {
  for (int n = 0; n < 4; ++n) matches[n] += other.matches[n], ngrams[n] += other.ngrams[n];
  hypothesis_length += other.hypothesis_length;
  reference_length += other.reference_length;
  return *this;
}

BleuStats bleu_segment_stats(const std::string& hypothesis, const std::string& reference) {
  const std::vector<std::string> hyp = split_whitespace(tokenize_13a(hypothesis));
  const std::vector<std::string> ref = split_whitespace(tokenize_13a(reference));
  const auto hyp_counts = count_ngrams(hyp), ref_counts = count_ngrams(ref);
  BleuStats stats;
  stats.hypothesis_length = static_cast<int64_t>(hyp.size());
  stats.reference_length = static_cast<int64_t>(ref.size());
  for (int n = 0; n < 4; ++n) {
    stats.ngrams[n] = std::max<int64_t>(0, stats.hypothesis_length - n);
    for (const auto& [gram, count] : hyp_counts[n]) {
      const auto found = ref_counts[n].find(gram);
      if (found != ref_counts[n].end()) stats.matches[n] += std::min(count, found->second);
    }
  }
  return stats;
}

double bleu_score(const BleuStats& s) {
  bool any_match = false;
  for (int64_t m : s.matches) any_match = any_match || m > 0;
  if (!any_match) return 0.0;
  double brevity = 1.0;
  if (s.hypothesis_length < s.reference_length)
    brevity = s.hypothesis_length > 0 ? std::exp(1.0 - static_cast<double>(s.reference_length) /
                                                           static_cast<double>(s.hypothesis_length))
                                      : 0.0;
  // Precisions in percent; an order the hypothesis has no n-grams of stays 0 and zeroes the score, as
  // in sacreBLEU (whose log of 0 is -9999999999).
  double log_sum = 0.0, smoothing = 1.0;
  for (int n = 0; n < 4; ++n) {
    double precision = 0.0;
    if (s.ngrams[n] == 0) {
      for (int rest = n; rest < 4; ++rest) log_sum += -9999999999.0;
      break;
    }
    if (s.matches[n] == 0) {
      smoothing *= 2.0;
      precision = 100.0 / (smoothing * static_cast<double>(s.ngrams[n]));
    } else {
      precision = 100.0 * static_cast<double>(s.matches[n]) / static_cast<double>(s.ngrams[n]);
    }
    log_sum += std::log(precision);
  }
  return brevity * std::exp(log_sum / 4.0);
}

double corpus_bleu(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references) {
  if (hypotheses.size() != references.size()) throw std::invalid_argument("corpus_bleu: one reference per hypothesis");
  BleuStats total;
  for (size_t i = 0; i < hypotheses.size(); ++i) total += bleu_segment_stats(hypotheses[i], references[i]);
  return bleu_score(total);
}

}  // namespace repro
