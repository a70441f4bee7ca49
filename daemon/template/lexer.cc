#include "daemon/template/lexer.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "daemon/template/text_util.h"

namespace medq::chat {
namespace {

std::string NormalizeNewlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out.push_back(s[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

// Python's `\s` on one code point, used for whitespace control.
bool IsSpaceAt(std::string_view s, size_t i, size_t* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) {
    *len = 1;
    return IsPyWhitespace(c);
  }
  const size_t n = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 1;
  *len = std::min(n, s.size() - i);
  const std::vector<char32_t> cps = DecodeUtf8(s.substr(i, *len));
  return cps.size() == 1 && IsPyWhitespace(cps[0]);
}

bool IsAllSpace(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 1;
    if (!IsSpaceAt(s, i, &len)) return false;
    i += len;
  }
  return true;
}

std::string RStripSpace(std::string_view s) {
  return PyStrip(s, nullptr, false, true);
}

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(NormalizeNewlines(source)) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i) {
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }

  std::vector<Token> Run() {
    while (pos_ < src_.size()) {
      const size_t tag = FindTagStart(pos_);
      if (tag == std::string::npos) {
        Emit(TokenType::kData, src_.substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      char sign = 0;
      if (tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')) {
        sign = src_[tag + 2];
      }
      if (kind == '%' && TryRaw(tag, sign)) continue;
      EmitText(pos_, tag, sign, kind != '{');
      pos_ = tag + 2 + (sign != 0 ? 1 : 0);
      if (kind == '#') {
        SkipComment(tag);
      } else {
        LexTag(kind == '%', tag);
      }
    }
    Token eof;
    eof.type = TokenType::kEof;
    eof.pos = PosOf(src_.size());
    tokens_.push_back(eof);
    return std::move(tokens_);
  }

 private:
  SourcePos PosOf(size_t offset) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), offset);
    const size_t line = static_cast<size_t>(it - line_starts_.begin());
    const size_t col = offset - line_starts_[line - 1];
    return SourcePos{static_cast<int>(line), static_cast<int>(col + 1)};
  }

  [[noreturn]] void Fail(const std::string& msg, size_t offset) const {
    throw TemplateError(msg, PosOf(offset));
  }

  size_t FindTagStart(size_t from) const {
    size_t i = from;
    while (true) {
      i = src_.find('{', i);
      if (i == std::string::npos || i + 1 >= src_.size()) return std::string::npos;
      const char c = src_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
      ++i;
    }
  }

  void Emit(TokenType type, std::string value, size_t offset) {
    Token t;
    t.type = type;
    t.value = std::move(value);
    t.pos = PosOf(offset);
    tokens_.push_back(std::move(t));
  }

  // Emits src_[begin, end) as data after Jinja2's whitespace control for a tag
  // opening at `end` with `sign`; `lstrip` is false for `{{`.
  void EmitText(size_t begin, size_t end, char sign, bool lstrip) {
    std::string text = src_.substr(begin, end - begin);
    if (sign == '-') {
      text = RStripSpace(text);
    } else if (sign != '+' && lstrip) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size() &&
          IsAllSpace(std::string_view(text).substr(l_pos))) {
        text.resize(l_pos);
      }
    }
    if (!text.empty()) Emit(TokenType::kData, std::move(text), begin);
  }

  // After a tag's closing delimiter at [p, p+2): `-` strips all whitespace,
  // trim_blocks drops one newline after `%}` / `#}` unless `+` was given.
  void AfterTagEnd(size_t p, char sign, bool trim) {
    size_t q = p + 2;
    if (sign == '-') {
      size_t len = 1;
      while (q < src_.size() && IsSpaceAt(src_, q, &len))
        q += len;
    } else if (sign != '+' && trim && q < src_.size() && src_[q] == '\n') {
      ++q;
    }
    line_starting_ = q > 0 && src_[q - 1] == '\n';
    pos_ = q;
  }

  void SkipComment(size_t tag) {
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) Fail("missing end of comment tag '#}'", tag);
    char sign = 0;
    if (end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+')) sign = src_[end - 1];
    AfterTagEnd(end, sign, true);
  }

  static bool WordAt(std::string_view s, size_t i, std::string_view word) {
    if (s.substr(i, word.size()) != word) return false;
    const size_t j = i + word.size();
    return j >= s.size() || !(std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_');
  }

  size_t SkipSpaces(size_t i) const {
    size_t len = 1;
    while (i < src_.size() && IsSpaceAt(src_, i, &len))
      i += len;
    return i;
  }

  // `{% raw %}...{% endraw %}`: the body is data, untouched.
  bool TryRaw(size_t tag, char sign) {
    size_t i = SkipSpaces(tag + 2 + (sign != 0 ? 1 : 0));
    if (!WordAt(src_, i, "raw")) return false;
    i = SkipSpaces(i + 3);
    char end_sign = 0;
    if (src_.compare(i, 3, "-%}") == 0) {
      end_sign = '-';
      ++i;
    } else if (src_.compare(i, 2, "%}") != 0) {
      return false;
    }
    EmitText(pos_, tag, sign, true);
    // The raw start tag gets no trim_blocks newline removal (as in Jinja2).
    AfterTagEnd(i, end_sign, false);
    size_t search = pos_;
    while (true) {
      const size_t t = src_.find("{%", search);
      if (t == std::string::npos) Fail("missing '{% endraw %}' for this raw block", tag);
      char s2 = 0;
      if (t + 2 < src_.size() && (src_[t + 2] == '-' || src_[t + 2] == '+')) s2 = src_[t + 2];
      size_t j = SkipSpaces(t + 2 + (s2 != 0 ? 1 : 0));
      if (!WordAt(src_, j, "endraw")) {
        search = t + 2;
        continue;
      }
      j = SkipSpaces(j + 6);
      char e2 = 0;
      if (src_.compare(j, 3, "-%}") == 0 || src_.compare(j, 3, "+%}") == 0) {
        e2 = src_[j];
        ++j;
      } else if (src_.compare(j, 2, "%}") != 0) {
        Fail("malformed '{% endraw %}' tag", t);
      }
      EmitText(pos_, t, s2, true);
      AfterTagEnd(j, e2, true);
      return true;
    }
  }

  void LexTag(bool block, size_t tag) {
    Emit(block ? TokenType::kBlockBegin : TokenType::kVarBegin, "", tag);
    std::vector<char> stack;  // open brackets; tag ends are only seen when empty
    while (true) {
      if (pos_ >= src_.size()) {
        Fail(block ? "unexpected end of template: missing '%}' for this block tag"
                   : "unexpected end of template: missing '}}' for this print tag",
             tag);
      }
      if (stack.empty() && TryTagEnd(block)) return;
      size_t len = 1;
      if (IsSpaceAt(src_, pos_, &len)) {
        pos_ += len;
        continue;
      }
      const char c = src_[pos_];
      if (std::isdigit(static_cast<unsigned char>(c))) {
        LexNumber();
      } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t j = pos_;
        while (j < src_.size() &&
               (std::isalnum(static_cast<unsigned char>(src_[j])) || src_[j] == '_')) {
          ++j;
        }
        Emit(TokenType::kName, src_.substr(pos_, j - pos_), pos_);
        pos_ = j;
      } else if (c == '\'' || c == '"') {
        LexString();
      } else {
        LexOperator(stack);
      }
    }
  }

  bool TryTagEnd(bool block) {
    const size_t p = pos_;
    if (block) {
      if (src_.compare(p, 3, "-%}") == 0 || src_.compare(p, 3, "+%}") == 0) {
        Emit(TokenType::kBlockEnd, "", p);
        AfterTagEnd(p + 1, src_[p], true);
        return true;
      }
      if (src_.compare(p, 2, "%}") == 0) {
        Emit(TokenType::kBlockEnd, "", p);
        AfterTagEnd(p, 0, true);
        return true;
      }
      return false;
    }
    if (src_.compare(p, 3, "-}}") == 0) {
      Emit(TokenType::kVarEnd, "", p);
      AfterTagEnd(p + 1, '-', false);
      return true;
    }
    if (src_.compare(p, 2, "}}") == 0) {
      Emit(TokenType::kVarEnd, "", p);
      AfterTagEnd(p, 0, false);
      return true;
    }
    return false;
  }

  size_t Digits(size_t j, bool allow_hex) const {
    // (\d+_)*\d+ : digits with single underscores between them.
    while (j < src_.size()) {
      const char d = src_[j];
      const bool digit = allow_hex ? std::isxdigit(static_cast<unsigned char>(d))
                                   : std::isdigit(static_cast<unsigned char>(d));
      if (digit) {
        ++j;
      } else if (d == '_' && j + 1 < src_.size() &&
                 (allow_hex ? std::isxdigit(static_cast<unsigned char>(src_[j + 1]))
                            : std::isdigit(static_cast<unsigned char>(src_[j + 1])))) {
        ++j;
      } else {
        break;
      }
    }
    return j;
  }

  void LexNumber() {
    const size_t start = pos_;
    const bool after_dot = start > 0 && src_[start - 1] == '.';
    size_t j = Digits(start, false);
    bool is_float = false;
    if (!after_dot) {
      size_t k = j;
      if (k + 1 < src_.size() && src_[k] == '.' &&
          std::isdigit(static_cast<unsigned char>(src_[k + 1]))) {
        k = Digits(k + 1, false);
        is_float = true;
      }
      if (k < src_.size() && (src_[k] == 'e' || src_[k] == 'E')) {
        size_t e = k + 1;
        if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
        if (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) {
          k = Digits(e, false);
          is_float = true;
        }
      }
      if (is_float) j = k;
    }
    std::string text;
    for (size_t i = start; i < j; ++i) {
      if (src_[i] != '_') text.push_back(src_[i]);
    }
    Token t;
    t.pos = PosOf(start);
    t.value = text;
    if (is_float) {
      t.type = TokenType::kFloat;
      t.float_value = std::strtod(text.c_str(), nullptr);
    } else {
      int base = 10;
      std::string body = text;
      if (text == "0" && j < src_.size() && std::strchr("xXoObB", src_[j]) != nullptr &&
          src_[j] != '\0') {
        const char p = static_cast<char>(std::tolower(static_cast<unsigned char>(src_[j])));
        base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
        const size_t e =
            Digits(j + 1 + (j + 1 < src_.size() && src_[j + 1] == '_' ? 1 : 0), base == 16);
        body.clear();
        for (size_t i = j + 1; i < e; ++i) {
          if (src_[i] != '_') body.push_back(src_[i]);
        }
        if (body.empty()) Fail("invalid integer literal", start);
        j = e;
      }
      errno = 0;
      char* endp = nullptr;
      const long long v = std::strtoll(body.c_str(), &endp, base);
      if (errno == ERANGE) Fail("integer literal is too large", start);
      if (endp == nullptr || *endp != '\0') Fail("invalid integer literal", start);
      t.type = TokenType::kInteger;
      t.int_value = v;
    }
    tokens_.push_back(std::move(t));
    pos_ = j;
  }

  void LexString() {
    const size_t start = pos_;
    const char quote = src_[pos_];
    size_t j = pos_ + 1;
    std::string raw;
    while (true) {
      if (j >= src_.size()) Fail("unterminated string literal", start);
      const char c = src_[j];
      if (c == '\\' && j + 1 < src_.size()) {
        raw.push_back(c);
        raw.push_back(src_[j + 1]);
        j += 2;
        continue;
      }
      if (c == quote) break;
      raw.push_back(c);
      ++j;
    }
    Emit(TokenType::kString, Unescape(raw, start), start);
    pos_ = j + 1;
  }

  // Python's "unicode-escape" decoding, which Jinja2 applies to literals.
  std::string Unescape(const std::string& raw, size_t at) const {
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '\\' || i + 1 >= raw.size()) {
        out.push_back(raw[i]);
        continue;
      }
      const char e = raw[++i];
      switch (e) {
        case '\n':
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
        case 'u':
        case 'U': {
          const size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          const std::string hex = raw.substr(i + 1, n);
          if (hex.size() != n || !std::all_of(hex.begin(), hex.end(), [](char h) {
                return std::isxdigit(static_cast<unsigned char>(h)) != 0;
              })) {
            Fail("truncated \\" + std::string(1, e) + " escape in string literal", at);
          }
          const unsigned long cp = std::strtoul(hex.c_str(), nullptr, 16);
          if (cp > 0x10ffff) Fail("illegal Unicode character in string literal", at);
          AppendUtf8(static_cast<char32_t>(cp), out);
          i += n;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            unsigned v = 0;
            size_t k = i;
            while (k < raw.size() && k < i + 3 && raw[k] >= '0' && raw[k] <= '7') {
              v = v * 8 + static_cast<unsigned>(raw[k] - '0');
              ++k;
            }
            AppendUtf8(static_cast<char32_t>(v), out);
            i = k - 1;
          } else {
            out.push_back('\\');
            out.push_back(e);
          }
      }
    }
    return out;
  }

  void LexOperator(std::vector<char>& stack) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (src_.compare(pos_, 2, op) == 0) {
        Emit(TokenType::kOperator, std::string(op), pos_);
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    static constexpr std::string_view kOne = "+-/*%~[](){}><=.:|,;";
    if (kOne.find(c) == std::string_view::npos) {
      Fail(std::string("unexpected character '") + c + "' in tag", pos_);
    }
    if (c == '(' || c == '[' || c == '{') {
      stack.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    } else if (c == ')' || c == ']' || c == '}') {
      if (stack.empty()) Fail(std::string("unexpected '") + c + "'", pos_);
      if (stack.back() != c) {
        Fail(std::string("unexpected '") + c + "', expected '" + stack.back() + "'", pos_);
      }
      stack.pop_back();
    }
    Emit(TokenType::kOperator, std::string(1, c), pos_);
    ++pos_;
  }

  std::string src_;
  std::vector<size_t> line_starts_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
};

}  // namespace

std::vector<Token> Tokenize(std::string_view source) {
  return Lexer(source).Run();
}

}  // namespace medq::chat
