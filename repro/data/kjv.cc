#include "data/kjv.h"

#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data/missing_data.h"

namespace repro {
namespace {

bool read_file(const std::string& path, std::string* text) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *text = buffer.str();
  return !text->empty();
}

// `bible -l0` prints, per chapter, a blank line, a heading ("Genesis 1"), a blank line, then one line per
// verse: two spaces, the verse number, a space, the text. Keep the verse text only.
std::string verses_only(const std::string& printed) {
  std::string out;
  std::istringstream lines(printed);
  std::string line;
  while (std::getline(lines, line)) {
    size_t i = 0;
    while (i < line.size() && line[i] == ' ') ++i;
    if (i == 0 || i == line.size() || !std::isdigit(static_cast<unsigned char>(line[i]))) continue;  // heading
    while (i < line.size() && std::isdigit(static_cast<unsigned char>(line[i]))) ++i;
    if (i < line.size() && line[i] == ' ') ++i;
    out.append(line, i, std::string::npos);
    out.push_back('\n');
  }
  return out;
}

std::string run_bible(const KjvSource& source) {
  if (access(source.program.c_str(), X_OK) != 0) throw MissingData("The KJV Bible program", source.program, kKjvPackage);
  if (access(source.data.c_str(), R_OK) != 0) throw MissingData("The KJV Bible text", source.data, kKjvPackage);
  // -p DIR -d NAME: read exactly source.data (by default bible also searches the current directory).
  const size_t slash = source.data.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : source.data.substr(0, slash);
  const std::string name = slash == std::string::npos ? source.data : source.data.substr(slash + 1);
  const std::string command =
      "'" + source.program + "' -l0 -p '" + dir + "' -d '" + name + "' gen1:1-rev22:21 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("cannot run " + source.program);
  std::string printed;
  std::array<char, 1 << 16> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) printed.append(buffer.data(), n);
  const int status = pclose(pipe);
  if (status != 0) throw std::runtime_error(command + " failed: " + printed.substr(0, 200));
  std::string text = verses_only(printed);
  if (text.size() < 1000000)
    throw std::runtime_error(command + " printed only " + std::to_string(text.size()) + " characters of verse text");
  return text;
}

}  // namespace

std::string load_kjv_text(const KjvSource& source) {
  std::string text;
  if (!source.cache.empty() && read_file(source.cache, &text)) return text;
  text = run_bible(source);
  if (!source.cache.empty()) {  // write, then rename: a crash never leaves half a cache behind
    const std::string partial = source.cache + ".partial";
    std::ofstream out(partial, std::ios::binary);
    out << text;
    out.close();
    if (!out || std::rename(partial.c_str(), source.cache.c_str()) != 0)
      std::fprintf(stderr, "warning: could not cache the KJV corpus at %s\n", source.cache.c_str());
  }
  return text;
}

CharCorpus make_char_corpus(const std::string& text, double valid_fraction) {
  std::array<int32_t, 256> id;
  id.fill(-1);
  for (unsigned char c : text) id[c] = 0;
  CharCorpus corpus;
  for (int c = 0; c < 256; ++c)
    if (id[c] == 0) {
      id[c] = static_cast<int32_t>(corpus.vocab.size());
      corpus.vocab.push_back(static_cast<char>(c));
    }
  const size_t split = static_cast<size_t>(static_cast<double>(text.size()) * (1.0 - valid_fraction));
  corpus.train.reserve(split);
  corpus.valid.reserve(text.size() - split);
  for (size_t i = 0; i < text.size(); ++i)
    (i < split ? corpus.train : corpus.valid).push_back(id[static_cast<unsigned char>(text[i])]);
  return corpus;
}

}  // namespace repro
