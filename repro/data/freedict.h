// English-German sentence pairs from the Debian package dict-freedict-eng-deu (the FreeDict edition of
// the Ding dictionary, GPL/AGPL). Besides about 460,000 headwords the dictionary holds example phrases
// and sentences, one a line, as
//     "I've made one or two modifications to the original design."  - Ich habe am ursprünglichen ...
// We keep those whose English side has 20 characters or more (about 44,000 lines), drop exact
// duplicates, and split them by English source, so no pair and no source sentence appears in two splits.
#ifndef RMSNORM_REPRO_DATA_FREEDICT_H_
#define RMSNORM_REPRO_DATA_FREEDICT_H_

#include <cstdint>
#include <string>
#include <vector>

namespace repro {

constexpr const char* kFreedictPackage = "dict-freedict-eng-deu";
constexpr const char* kFreedictPath = "/usr/share/dictd/freedict-eng-deu.dict.dz";

struct SentencePair {
  std::string english, german;  // UTF-8, trimmed
};

struct ParallelCorpus {
  std::vector<SentencePair> train, valid, test;
  int64_t example_lines = 0;  // example lines of 20+ English characters in the dictionary, before deduplication
};

// The example lines of a dictd text: `"English"  - German`, English at least min_english_chars code points.
std::vector<SentencePair> parse_freedict_examples(const std::string& dict_text, int min_english_chars = 20);

// Deduplicates the pairs and splits them by English source: the distinct sources are ordered by a hash of
// their text (stable across machines and dictionary line order), the first test_sources go to test, the
// next valid_sources to valid, the rest to train; every pair follows its source.
ParallelCorpus split_parallel(const std::vector<SentencePair>& pairs, int64_t valid_sources, int64_t test_sources);

// Reads the gzip'd dictd file with zlib and splits it: 1,000 sources for test, 1,000 for valid. Throws
// MissingData naming dict-freedict-eng-deu when the file is missing.
ParallelCorpus load_freedict_eng_deu(const std::string& path = kFreedictPath);

}  // namespace repro

#endif  // RMSNORM_REPRO_DATA_FREEDICT_H_
