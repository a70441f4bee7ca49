#include "daemon/template/text_util.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>

namespace medq::chat {
namespace {

bool IsCased(char32_t cp) {
  const auto cat = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT;
}

char32_t ToUpper(char32_t cp) {
  return static_cast<char32_t>(utf8proc_toupper(static_cast<utf8proc_int32_t>(cp)));
}
char32_t ToLower(char32_t cp) {
  return static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp)));
}
char32_t ToTitle(char32_t cp) {
  return static_cast<char32_t>(utf8proc_totitle(static_cast<utf8proc_int32_t>(cp)));
}

bool IsPrintable(char32_t cp) {
  if (cp == ' ') return true;
  if (cp < 0x20 || cp == 0x7f) return false;
  if (cp < 0x7f) return true;
  if (cp > 0x10ffff) return false;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

}  // namespace

std::vector<char32_t> DecodeUtf8(std::string_view s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    int len = 0;
    char32_t cp = 0;
    if (b0 < 0x80) {
      len = 1;
      cp = b0;
    } else if ((b0 & 0xe0) == 0xc0) {
      len = 2;
      cp = b0 & 0x1f;
    } else if ((b0 & 0xf0) == 0xe0) {
      len = 3;
      cp = b0 & 0x0f;
    } else if ((b0 & 0xf8) == 0xf0) {
      len = 4;
      cp = b0 & 0x07;
    }
    bool ok = len > 0 && i + static_cast<size_t>(len) <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto b = static_cast<unsigned char>(s[i + static_cast<size_t>(k)]);
      if ((b & 0xc0) != 0x80) {
        ok = false;
      } else {
        cp = (cp << 6) | (b & 0x3f);
      }
    }
    if (!ok) {
      out.push_back(b0);
      ++i;
      continue;
    }
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}

std::string EncodeUtf8(const std::vector<char32_t>& cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps)
    AppendUtf8(cp, out);
  return out;
}

size_t CodePointCount(std::string_view s) {
  return DecodeUtf8(s).size();
}

bool IsPyWhitespace(char32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x0a:
    case 0x0b:
    case 0x0c:
    case 0x0d:
    case 0x1c:
    case 0x1d:
    case 0x1e:
    case 0x1f:
    case 0x20:
    case 0x85:
    case 0xa0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202f:
    case 0x205f:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200a;
  }
}

bool IsPyAlpha(char32_t cp) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
      return true;
    default:
      return false;
  }
}

std::string PyStrip(std::string_view s, const std::string* chars, bool left, bool right) {
  const std::vector<char32_t> cps = DecodeUtf8(s);
  std::vector<char32_t> set;
  if (chars != nullptr) set = DecodeUtf8(*chars);
  auto strip_it = [&](char32_t cp) {
    if (chars == nullptr) return IsPyWhitespace(cp);
    for (char32_t c : set) {
      if (c == cp) return true;
    }
    return false;
  };
  size_t b = 0;
  size_t e = cps.size();
  if (left) {
    while (b < e && strip_it(cps[b]))
      ++b;
  }
  if (right) {
    while (e > b && strip_it(cps[e - 1]))
      --e;
  }
  return EncodeUtf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(b),
                                          cps.begin() + static_cast<std::ptrdiff_t>(e)));
}

std::string PyUpper(std::string_view s) {
  std::string out;
  for (char32_t cp : DecodeUtf8(s))
    AppendUtf8(ToUpper(cp), out);
  return out;
}

std::string PyLower(std::string_view s) {
  std::string out;
  for (char32_t cp : DecodeUtf8(s))
    AppendUtf8(ToLower(cp), out);
  return out;
}

std::string PyCapitalize(std::string_view s) {
  std::string out;
  bool first = true;
  for (char32_t cp : DecodeUtf8(s)) {
    AppendUtf8(first ? ToTitle(cp) : ToLower(cp), out);
    first = false;
  }
  return out;
}

std::string PyTitle(std::string_view s) {
  std::string out;
  bool prev_cased = false;
  for (char32_t cp : DecodeUtf8(s)) {
    const bool cased = IsCased(cp);
    AppendUtf8(cased ? (prev_cased ? ToLower(cp) : ToTitle(cp)) : cp, out);
    prev_cased = cased;
  }
  return out;
}

std::vector<std::string> PySplitLines(std::string_view s) {
  std::vector<std::string> lines;
  const std::vector<char32_t> cps = DecodeUtf8(s);
  std::vector<char32_t> cur;
  for (size_t i = 0; i < cps.size(); ++i) {
    const char32_t cp = cps[i];
    const bool brk = cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c ||
                     cp == 0x1d || cp == 0x1e || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
    if (!brk) {
      cur.push_back(cp);
      continue;
    }
    if (cp == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    lines.push_back(EncodeUtf8(cur));
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(EncodeUtf8(cur));
  return lines;
}

std::vector<std::string> PySplit(std::string_view s, const std::string* sep, int64_t maxsplit) {
  std::vector<std::string> parts;
  if (sep != nullptr) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(start, at - start));
      start = at + sep->size();
    }
    parts.emplace_back(s.substr(start));
    return parts;
  }
  const std::vector<char32_t> cps = DecodeUtf8(s);
  size_t i = 0;
  while (i < cps.size()) {
    while (i < cps.size() && IsPyWhitespace(cps[i]))
      ++i;
    if (i == cps.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
      // The remainder, with trailing whitespace removed, is the last part.
      size_t e = cps.size();
      while (e > i && IsPyWhitespace(cps[e - 1]))
        --e;
      parts.push_back(
          EncodeUtf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(i),
                                           cps.begin() + static_cast<std::ptrdiff_t>(e))));
      break;
    }
    size_t j = i;
    while (j < cps.size() && !IsPyWhitespace(cps[j]))
      ++j;
    parts.push_back(
        EncodeUtf8(std::vector<char32_t>(cps.begin() + static_cast<std::ptrdiff_t>(i),
                                         cps.begin() + static_cast<std::ptrdiff_t>(j))));
    i = j;
  }
  return parts;
}

std::string PyReplace(std::string_view s, std::string_view from, std::string_view to,
                      int64_t count) {
  std::string out;
  if (from.empty()) {
    // Python inserts `to` before every code point and at the end.
    int64_t done = 0;
    const std::vector<char32_t> cps = DecodeUtf8(s);
    for (char32_t cp : cps) {
      if (count < 0 || done < count) {
        out += to;
        ++done;
      }
      AppendUtf8(cp, out);
    }
    if (count < 0 || done < count) out += to;
    return out;
  }
  size_t start = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(from, start);
    if (at == std::string_view::npos) break;
    out.append(s.substr(start, at - start));
    out.append(to);
    start = at + from.size();
    ++done;
  }
  out.append(s.substr(start));
  return out;
}

std::string PyReprString(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t cp : DecodeUtf8(s)) {
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (IsPrintable(cp)) {
      AppendUtf8(cp, out);
    } else {
      char buf[16];
      if (cp < 0x100) {
        std::snprintf(buf, sizeof(buf), "\\x%02x", static_cast<unsigned>(cp));
      } else if (cp < 0x10000) {
        std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned>(cp));
      } else {
        std::snprintf(buf, sizeof(buf), "\\U%08x", static_cast<unsigned>(cp));
      }
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

std::string PyReprFloat(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, then laid out the way
  // CPython's float_repr does: plain notation when -4 < exponent < 16.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (!sci.empty() && sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t epos = sci.find('e');
  std::string mant = sci.substr(0, epos);
  const int exp10 = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (char c : mant) {
    if (c != '.') digits.push_back(c);
  }
  while (digits.size() > 1 && digits.back() == '0')
    digits.pop_back();
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  std::string out = sign;
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<size_t>(-decpt), '0');
      out += digits;
    } else if (static_cast<size_t>(decpt) >= digits.size()) {
      out += digits;
      out.append(static_cast<size_t>(decpt) - digits.size(), '0');
      out += ".0";
    } else {
      out += digits.substr(0, static_cast<size_t>(decpt));
      out += ".";
      out += digits.substr(static_cast<size_t>(decpt));
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) {
    out += ".";
    out += digits.substr(1);
  }
  char ebuf[16];
  std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
  out += ebuf;
  return out;
}

}  // namespace medq::chat
