#include "common/utf8.h"

namespace repro {

std::u32string utf8_decode(const std::string& text) {
  std::u32string out;
  out.reserve(text.size());
  const size_t n = text.size();
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  for (size_t i = 0; i < n;) {
    const unsigned char lead = byte(i);
    const int extra = lead < 0x80 ? 0 : (lead & 0xE0) == 0xC0 ? 1 : (lead & 0xF0) == 0xE0 ? 2 : (lead & 0xF8) == 0xF0 ? 3 : -1;
    bool well_formed = extra >= 0;  // the continuation bytes are checked below
    char32_t c = extra == 0 ? lead : extra == 1 ? (lead & 0x1F) : extra == 2 ? (lead & 0x0F) : (lead & 0x07);
    for (int k = 1; well_formed && k <= extra; ++k) {
      if (i + static_cast<size_t>(k) >= n || (byte(i + k) & 0xC0) != 0x80) well_formed = false;
      else c = (c << 6) | (byte(i + k) & 0x3F);
    }
    if (!well_formed) {
      out.push_back(lead);
      ++i;
    } else {
      out.push_back(c);
      i += 1 + static_cast<size_t>(extra);
    }
  }
  return out;
}

std::string utf8_encode(const std::u32string& code_points) {
  std::string out;
  for (char32_t c : code_points) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return out;
}

}  // namespace repro
