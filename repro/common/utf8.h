// UTF-8 to code points and back: the translation task works on characters (code points), and chrF
// counts character n-grams, so both need the text as characters rather than bytes.
#ifndef RMSNORM_REPRO_COMMON_UTF8_H_
#define RMSNORM_REPRO_COMMON_UTF8_H_

#include <string>
#include <vector>

namespace repro {

// Code points of a UTF-8 string. A byte that does not start a well-formed sequence becomes one code
// point of its own value (as Latin-1 would read it), so any byte string decodes and nothing is lost.
std::u32string utf8_decode(const std::string& text);
// UTF-8 of code points (the inverse of utf8_decode on well-formed text).
std::string utf8_encode(const std::u32string& code_points);

}  // namespace repro

#endif  // RMSNORM_REPRO_COMMON_UTF8_H_
