#include "daemon/tokenizer/byte_level.h"

#include "daemon/tokenizer/utf8.h"

namespace medq::tokenizer {
namespace {

struct Tables {
  std::array<std::string, 256> to_unicode;
  std::array<int, 512> to_byte{};  // every mapped code point is below 512

  Tables() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      const char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      AppendUtf8(cp, to_unicode[b]);
      to_byte[cp] = b;
    }
  }
};

const Tables& GetTables() {
  static const Tables tables;
  return tables;
}

}  // namespace

const std::string& ByteToUnicode(unsigned char b) {
  return GetTables().to_unicode[b];
}

void AppendByteLevel(std::string_view text, std::string& out) {
  const auto& t = GetTables();
  for (char c : text)
    out += t.to_unicode[static_cast<unsigned char>(c)];
}

std::optional<unsigned char> UnicodeToByte(char32_t cp) {
  if (cp >= 512) return std::nullopt;
  const int b = GetTables().to_byte[cp];
  if (b < 0) return std::nullopt;
  return static_cast<unsigned char>(b);
}

bool AppendBytesOfToken(std::string_view token, std::string& out) {
  const size_t mark = out.size();
  size_t i = 0;
  while (i < token.size()) {
    size_t len = 1;
    const char32_t cp = DecodeAt(token, i, &len);
    const auto b = UnicodeToByte(cp);
    if (!b) {
      out.resize(mark);
      return false;
    }
    out.push_back(static_cast<char>(*b));
    i += len;
  }
  return true;
}

}  // namespace medq::tokenizer
