// The King James Bible from the Debian package bible-kjv, as a character-level corpus.
//
// The package stores the text compressed in its own format (/usr/lib/bible.data) and prints it with
// the `bible` program. We run `bible -l0 gen1:1-rev22:21` once, keep one verse per line (chapter
// headings and verse numbers dropped), and cache the result as a plain text file, so later runs read
// the cache.
#ifndef RMSNORM_REPRO_DATA_KJV_H_
#define RMSNORM_REPRO_DATA_KJV_H_

#include <cstdint>
#include <string>
#include <vector>

namespace repro {

constexpr const char* kKjvPackage = "bible-kjv";

struct KjvSource {
  std::string program = "/usr/bin/bible";    // from bible-kjv
  std::string data = "/usr/lib/bible.data";  // from bible-kjv-text, a dependency of bible-kjv
  std::string cache;                         // the plain-text cache; "" = do not cache
};

// The corpus text, one verse per line. Throws MissingData naming bible-kjv when the program or its data
// is missing, std::runtime_error when the program fails.
std::string load_kjv_text(const KjvSource& source);

// Characters as token ids. The vocabulary is the sorted set of bytes in the whole corpus (about 60).
struct CharCorpus {
  std::vector<char> vocab;            // id -> character
  std::vector<int32_t> train, valid;  // token ids: the first 90% of the text, and the last 10%
  int vocab_size() const { return static_cast<int>(vocab.size()); }
};
CharCorpus make_char_corpus(const std::string& text, double valid_fraction = 0.1);

}  // namespace repro

#endif  // RMSNORM_REPRO_DATA_KJV_H_
