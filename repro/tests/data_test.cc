// The data loaders: a missing data set is an error naming the Debian package to install; the installed
// data sets load with the shapes and contents we expect (skipped when the package is not installed).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "data/fashion_mnist.h"
#include "data/freedict.h"
#include "data/kjv.h"
#include "data/missing_data.h"

namespace repro {
namespace {

template <class Fn>
std::string missing_data_message(Fn&& fn) {
  try {
    fn();
  } catch (const MissingData& e) {
    return e.what();
  }
  return "(no MissingData thrown)";
}

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "repro_data_test_" + std::to_string(getpid()) + "_" + name;
}

TEST(DataLoaders, MissingFashionMnistNamesThePackage) {
  const std::string message = missing_data_message([] { load_fashion_mnist("/nonexistent/fashion-mnist"); });
  EXPECT_NE(message.find("dataset-fashion-mnist"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/fashion-mnist/train-images-idx3-ubyte.gz"), std::string::npos) << message;
}

TEST(DataLoaders, MissingBibleProgramNamesThePackage) {
  const std::string message = missing_data_message([] { load_kjv_text({"/nonexistent/bible", "/usr/lib/bible.data", ""}); });
  EXPECT_NE(message.find("bible-kjv"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/bible"), std::string::npos) << message;
}

TEST(DataLoaders, MissingBibleTextNamesThePackage) {
  const std::string message = missing_data_message([] { load_kjv_text({"/bin/true", "/nonexistent/bible.data", ""}); });
  EXPECT_NE(message.find("bible-kjv"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/bible.data"), std::string::npos) << message;
}

TEST(DataLoaders, KjvCacheIsReadInsteadOfRunningTheProgram) {
  const std::string cache = temp_path("cache.txt");
  { std::ofstream(cache) << "In the cache.\n"; }
  // The program does not exist: only the cache can answer.
  EXPECT_EQ(load_kjv_text({"/nonexistent/bible", "/nonexistent/bible.data", cache}), "In the cache.\n");
  std::remove(cache.c_str());
}

TEST(DataLoaders, CharCorpusSplitsAndMapsCharacters) {
  const CharCorpus corpus = make_char_corpus("abcabcabca", 0.2);
  ASSERT_EQ(corpus.vocab_size(), 3);
  EXPECT_EQ(corpus.train.size(), 8u);
  EXPECT_EQ(corpus.valid.size(), 2u);
  EXPECT_EQ(corpus.vocab[corpus.train[1]], 'b');
  EXPECT_EQ(corpus.vocab[corpus.valid[1]], 'a');
}

TEST(DataLoaders, InstalledKjvLoads) {
  if (access("/usr/bin/bible", X_OK) != 0 || access("/usr/lib/bible.data", R_OK) != 0)
    GTEST_SKIP() << "Debian package bible-kjv is not installed";
  const std::string cache = temp_path("kjv.txt");
  const std::string text = load_kjv_text({"/usr/bin/bible", "/usr/lib/bible.data", cache});
  EXPECT_EQ(text.substr(0, 56), "In the beginning God created the heaven and the earth.\nA");
  EXPECT_GT(text.size(), 4000000u);
  EXPECT_EQ(text.substr(text.size() - 59), "\nThe grace of our Lord Jesus Christ be with you all. Amen.\n");
  EXPECT_EQ(load_kjv_text({"/nonexistent", "/nonexistent", cache}), text);  // the cache was written
  const CharCorpus corpus = make_char_corpus(text);
  EXPECT_GT(corpus.vocab_size(), 40);
  EXPECT_LT(corpus.vocab_size(), 100);
  std::remove(cache.c_str());
}

TEST(DataLoaders, InstalledFashionMnistLoads) {
  if (access((std::string(kFashionMnistDir) + "/train-images-idx3-ubyte.gz").c_str(), R_OK) != 0)
    GTEST_SKIP() << "Debian package dataset-fashion-mnist is not installed";
  const FashionMnist data = load_fashion_mnist();
  EXPECT_EQ(data.train.count, 60000);
  EXPECT_EQ(data.test.count, 10000);
  EXPECT_EQ(data.train.pixels, 784);
  ASSERT_EQ(data.train.images.size(), 60000u * 784u);
  std::vector<int> per_class(10, 0);
  for (int32_t l : data.test.labels) ++per_class[l];
  for (int n : per_class) EXPECT_EQ(n, 1000);  // the test set is balanced
  double sum = 0.0;
  for (float v : data.train.images) sum += v;
  EXPECT_NEAR(sum / static_cast<double>(data.train.images.size()), 0.0, 1e-3);  // standardized
}

TEST(DataLoaders, MissingFreedictNamesThePackage) {
  const std::string message = missing_data_message([] { load_freedict_eng_deu("/nonexistent/freedict-eng-deu.dict.dz"); });
  EXPECT_NE(message.find("dict-freedict-eng-deu"), std::string::npos) << message;
  EXPECT_NE(message.find("/nonexistent/freedict-eng-deu.dict.dz"), std::string::npos) << message;
}

TEST(DataLoaders, FreedictExamplesAreParsed) {
  const std::string dict =
      "abandon\n   [headword] /əˈbændən/\n"
      "      \"I've made one or two modifications.\"  - Ich habe ein paar Änderungen vorgenommen.\n"
      "      \"too short\"  - zu kurz\n"                          // English under 20 characters
      "      \"A quote without a translation\"\n"                 // no separator
      "\"Über twenty characters, unindented\"  - Über zwanzig \n";  // trimmed; counted in characters
  const std::vector<SentencePair> pairs = parse_freedict_examples(dict);
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].english, "I've made one or two modifications.");
  EXPECT_EQ(pairs[0].german, "Ich habe ein paar Änderungen vorgenommen.");
  EXPECT_EQ(pairs[1].german, "Über zwanzig");
}

TEST(DataLoaders, ParallelSplitKeepsSourcesApartAndDropsDuplicates) {
  std::vector<SentencePair> pairs;
  for (int i = 0; i < 50; ++i) {
    const std::string english = "sentence number " + std::to_string(i);
    pairs.push_back({english, "Satz " + std::to_string(i)});
    pairs.push_back({english, "Satz " + std::to_string(i)});  // an exact duplicate
    if (i % 5 == 0) pairs.push_back({english, "Satz Nummer " + std::to_string(i)});  // a second translation
  }
  const ParallelCorpus corpus = split_parallel(pairs, 10, 5);
  EXPECT_EQ(corpus.example_lines, 110);
  EXPECT_EQ(corpus.train.size() + corpus.valid.size() + corpus.test.size(), 60u);  // duplicates dropped
  std::set<std::string> train_sources, valid_sources, test_sources;
  for (const auto& p : corpus.train) train_sources.insert(p.english);
  for (const auto& p : corpus.valid) valid_sources.insert(p.english);
  for (const auto& p : corpus.test) test_sources.insert(p.english);
  EXPECT_EQ(test_sources.size(), 5u);
  EXPECT_EQ(valid_sources.size(), 10u);
  EXPECT_EQ(train_sources.size(), 35u);
  for (const std::string& s : test_sources) EXPECT_EQ(train_sources.count(s) + valid_sources.count(s), 0u) << s;
  for (const std::string& s : valid_sources) EXPECT_EQ(train_sources.count(s), 0u) << s;
  // The split depends on the texts only, not on their order in the dictionary.
  std::vector<SentencePair> reversed(pairs.rbegin(), pairs.rend());
  const ParallelCorpus again = split_parallel(reversed, 10, 5);
  ASSERT_EQ(again.test.size(), corpus.test.size());
  for (size_t i = 0; i < corpus.test.size(); ++i) EXPECT_EQ(again.test[i].german, corpus.test[i].german);
}

TEST(DataLoaders, InstalledFreedictLoads) {
  if (access(kFreedictPath, R_OK) != 0) GTEST_SKIP() << "Debian package dict-freedict-eng-deu is not installed";
  const ParallelCorpus corpus = load_freedict_eng_deu();
  EXPECT_GT(corpus.example_lines, 40000);  // about 44,000 example lines of 20+ characters
  EXPECT_GT(corpus.train.size(), 30000u);
  EXPECT_GE(corpus.valid.size(), 1000u);  // 1,000 sources, some with several translations
  EXPECT_GE(corpus.test.size(), 1000u);
  std::set<std::string> train_sources;
  for (const auto& p : corpus.train) train_sources.insert(p.english);
  for (const auto& p : corpus.test) EXPECT_EQ(train_sources.count(p.english), 0u) << p.english;
}

}  // namespace
}  // namespace repro
