#include "data/freedict.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <utility>

#include "common/utf8.h"
#include "data/gzip_file.h"

namespace repro {
namespace {

std::string trim(const std::string& s) {
  const size_t first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// FNV-1a, 64 bits: a fixed function of the text, so the split is the same on every machine.
uint64_t fnv1a(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001B3ull;
  return h;
}

}  // namespace

std::vector<SentencePair> parse_freedict_examples(const std::string& dict_text, int min_english_chars) {
  // An example line: indentation, the English in double quotes, two spaces, "- ", the German.
  static const std::string kSeparator = "\"  - ";
  std::vector<SentencePair> pairs;
  std::istringstream lines(dict_text);
  std::string line;
  while (std::getline(lines, line)) {
    const std::string text = trim(line);
    if (text.size() < 2 || text[0] != '"') continue;
    const size_t separator = text.find(kSeparator, 1);
    if (separator == std::string::npos) continue;
    SentencePair pair{trim(text.substr(1, separator - 1)), trim(text.substr(separator + kSeparator.size()))};
    if (pair.german.empty() || static_cast<int>(utf8_decode(pair.english).size()) < min_english_chars) continue;
    pairs.push_back(std::move(pair));
  }
  return pairs;
}

ParallelCorpus split_parallel(const std::vector<SentencePair>& pairs, int64_t valid_sources, int64_t test_sources) {
  // Distinct pairs, grouped by source, in the order of the source's hash (ties broken by the text).
  std::map<std::pair<uint64_t, std::string>, std::set<std::string>> by_source;
  for (const SentencePair& p : pairs) by_source[{fnv1a(p.english), p.english}].insert(p.german);
  ParallelCorpus corpus;
  corpus.example_lines = static_cast<int64_t>(pairs.size());
  int64_t index = 0;
  for (const auto& [key, germans] : by_source) {
    std::vector<SentencePair>& split = index < test_sources                   ? corpus.test
                                       : index < test_sources + valid_sources ? corpus.valid
                                                                              : corpus.train;
    for (const std::string& german : germans) split.push_back({key.second, german});
    ++index;
  }
  return corpus;
}

ParallelCorpus load_freedict_eng_deu(const std::string& path) {
  const std::string text = read_gzip_file(path, "The FreeDict English-German dictionary", kFreedictPackage);
  return split_parallel(parse_freedict_examples(text), /*valid_sources=*/1000, /*test_sources=*/1000);
}

}  // namespace repro
