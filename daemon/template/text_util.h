// UTF-8 helpers with Python str semantics: Jinja2 works on code points, so
// lengths, indexing, slicing, stripping and case mapping are done on code
// points here, not on bytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"

namespace medq::chat {

// Decodes UTF-8 into code points. Never fails: an invalid byte becomes one
// code point with the byte's value (so bad input is handled, not rejected).
std::vector<char32_t> DecodeUtf8(std::string_view s);

std::string EncodeUtf8(const std::vector<char32_t>& cps);

// Number of code points (Python len()).
size_t CodePointCount(std::string_view s);

// Python str.isspace() for one code point.
bool IsPyWhitespace(char32_t cp);
// Python str.isalpha() for one code point (Unicode categories L*).
bool IsPyAlpha(char32_t cp);

// Python str.strip/lstrip/rstrip. `chars` empty-and-not-given means whitespace.
std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right);

// Python str.upper()/lower() (per code point; multi-character special cases
// such as German sharp s are not expanded).
std::string PyUpper(std::string_view s);
std::string PyLower(std::string_view s);
// Python str.capitalize(): first code point title-cased, the rest lower-cased.
std::string PyCapitalize(std::string_view s);
// Python str.title().
std::string PyTitle(std::string_view s);
// Python str.splitlines() (keepends=False).
std::vector<std::string> PySplitLines(std::string_view s);
// Python str.split(sep, maxsplit): sep == nullptr splits on runs of whitespace.
std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit);
// Python str.replace(old, new, count); count < 0 means all.
std::string PyReplace(std::string_view s, std::string_view from, std::string_view to,
                      int64_t count);
// Python repr() of a str: quotes chosen like CPython, non-printables escaped.
std::string PyReprString(std::string_view s);
// Python repr() of a float (shortest round-trip, 'inf', 'nan', '1e+16').
std::string PyReprFloat(double d);

}  // namespace medq::chat
