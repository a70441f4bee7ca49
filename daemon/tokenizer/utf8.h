// UTF-8 helpers shared by the tokenizer pipeline: decoding code points,
// replacing invalid sequences, and the character classes that the Hugging Face
// implementation takes from Rust's `char` methods.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/utf8.h"

namespace medq::tokenizer {

// Decodes the code point starting at s[i] and stores its byte length in *len.
// Precondition: s is valid UTF-8 (run SanitizeUtf8 first) and i < s.size().
char32_t DecodeAt(std::string_view s, size_t i, size_t* len);

// Byte length of the UTF-8 sequence whose lead byte is b (1 for a stray byte).
inline size_t Utf8SeqLen(unsigned char b) {
  if (b < 0x80) return 1;
  if ((b & 0xE0) == 0xC0) return 2;
  if ((b & 0xF0) == 0xE0) return 3;
  if ((b & 0xF8) == 0xF0) return 4;
  return 1;
}

// Returns s with every maximal invalid subsequence (the WHATWG / Unicode
// "substitution of maximal subparts" rule, also Rust's from_utf8_lossy)
// replaced by U+FFFD. Valid input is returned unchanged.
std::string SanitizeUtf8(std::string_view s);

// True when s is valid UTF-8.
bool IsValidUtf8(std::string_view s);

// Rust char::is_whitespace (Unicode White_Space).
bool IsWhitespace(char32_t c);
// Rust char::is_alphanumeric (approximated by general categories L* and N*).
bool IsAlphanumeric(char32_t c);
// Rust char::is_numeric (general categories Nd, Nl, No).
bool IsNumeric(char32_t c);
// The HF Punctuation pre-tokenizer's test: ASCII punctuation or category P*.
bool IsPunctuation(char32_t c);

}  // namespace medq::tokenizer
