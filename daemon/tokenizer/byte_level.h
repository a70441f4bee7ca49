// The GPT-2 byte-to-unicode table used by ByteLevel pre-tokenizers and
// decoders: every byte maps to one printable code point ("Ġ" for space).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

namespace medq::tokenizer {

// GPT-2's pre-tokenization pattern, used by ByteLevel with use_regex (and by
// the demo model's BPE trainer, so that training splits text as loading does).
inline constexpr std::string_view kByteLevelPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// The UTF-8 string of the code point that byte b maps to.
const std::string& ByteToUnicode(unsigned char b);

// Appends the byte-level form of every byte of text to out.
void AppendByteLevel(std::string_view text, std::string& out);

// The byte a code point stands for, or nullopt for one outside the table.
std::optional<unsigned char> UnicodeToByte(char32_t cp);

// Reverses AppendByteLevel for one token: appends its bytes to out and
// returns true, or returns false (leaving out unchanged) when some character of
// token is not in the table.
bool AppendBytesOfToken(std::string_view token, std::string& out);

}  // namespace medq::tokenizer
