// Python's printf-style formatting (`'%s: %d' % (a, b)` and the `format`
// filter): conversions s r d i f F e E g G x X o c and %%, with flags, width
// and precision, and %(name)s with a dict.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "daemon/template/builtins.h"
#include "daemon/template/evaluator.h"
#include "daemon/template/text_util.h"

namespace medq::chat {
namespace {

// "%<conv> format: a real number is required, not <type>". Built with append:
// GCC 12 misreports `literal + std::string&&` chains under -Wrestrict.
[[noreturn]] void NeedNumber(char conv, const Value& v) {
  std::string msg(1, '%');
  msg.push_back(conv);
  msg.append(" format: a real number is required, not ").append(v.TypeName());
  throw TemplateError(msg);
}

std::string Pad(std::string s, const std::string& flags, int width) {
  const auto len = static_cast<int>(CodePointCount(s));
  if (width <= len) return s;
  const std::string fill(static_cast<size_t>(width - len), ' ');
  return flags.find('-') != std::string::npos ? s + fill : fill + s;
}

std::string FormatNumber(const Value& v, char conv, const std::string& flags, int width,
                         int precision) {
  std::string spec = "%" + flags;
  if (width >= 0) spec += std::to_string(width);
  if (precision >= 0) spec.append(".").append(std::to_string(precision));
  char buf[512];
  if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
    if (!v.is_number()) NeedNumber(conv, v);
    const long long i = v.is_float()  ? static_cast<long long>(v.as_float())
                        : v.is_bool() ? (v.as_bool() ? 1 : 0)
                                      : static_cast<long long>(v.as_int());
    spec += "ll";
    spec.push_back(conv == 'i' ? 'd' : conv);
    std::snprintf(buf, sizeof(buf), spec.c_str(), i);
    return buf;
  }
  if (!v.is_number()) NeedNumber(conv, v);
  spec.push_back(conv);
  std::snprintf(buf, sizeof(buf), spec.c_str(), v.ToDouble());
  return buf;
}

}  // namespace

std::string PercentFormat(const std::string& fmt, const Value& args) {
  List positional;
  const Dict* mapping = nullptr;
  if (args.is_tuple()) {
    positional = args.as_list();
  } else if (args.is_dict()) {
    mapping = &args.as_dict();
    positional.push_back(args);
  } else {
    positional.push_back(args);
  }
  size_t next = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) throw TemplateError("incomplete format");
    if (fmt[i] == '%') {
      out.push_back('%');
      continue;
    }
    const Value* arg = nullptr;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos) throw TemplateError("incomplete format key");
      if (mapping == nullptr) throw TemplateError("format requires a mapping");
      arg = mapping->Find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (arg == nullptr) {
        std::string msg = "format key '";
        msg.append(fmt, i + 1, close - i - 1).append("' not found");
        throw TemplateError(msg);
      }
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < fmt.size() && std::string_view("-+ #0").find(fmt[i]) != std::string_view::npos) {
      flags.push_back(fmt[i++]);
    }
    int width = -1;
    while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) {
      width = std::max(width, 0) * 10 + (fmt[i++] - '0');
      if (width > 4096) throw TemplateError("format width too large");
    }
    int precision = -1;
    if (i < fmt.size() && fmt[i] == '.') {
      ++i;
      precision = 0;
      while (i < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[i]))) {
        precision = precision * 10 + (fmt[i++] - '0');
        if (precision > 300) throw TemplateError("format precision too large");
      }
    }
    if (i >= fmt.size()) throw TemplateError("incomplete format");
    const char conv = fmt[i];
    if (arg == nullptr) {
      if (next >= positional.size()) throw TemplateError("not enough arguments for format string");
      arg = &positional[next++];
    }
    switch (conv) {
      case 's':
      case 'r': {
        std::string s = conv == 's' ? arg->Str() : arg->Repr();
        if (precision >= 0) {
          std::vector<char32_t> cps = DecodeUtf8(s);
          if (cps.size() > static_cast<size_t>(precision))
            cps.resize(static_cast<size_t>(precision));
          s = EncodeUtf8(cps);
        }
        out += Pad(std::move(s), flags, width);
        break;
      }
      case 'c': {
        std::string s;
        if (arg->is_int()) {
          AppendUtf8(static_cast<char32_t>(arg->as_int()), s);
        } else if (arg->is_string() && CodePointCount(arg->as_string()) == 1) {
          s = arg->as_string();
        } else {
          throw TemplateError("%c requires an int or a single character");
        }
        out += Pad(std::move(s), flags, width);
        break;
      }
      case 'd':
      case 'i':
      case 'x':
      case 'X':
      case 'o':
      case 'f':
      case 'F':
      case 'e':
      case 'E':
      case 'g':
      case 'G':
        out += FormatNumber(*arg, conv, flags, width, precision);
        break;
      default:
        std::string msg = "unsupported format character '";
        msg.push_back(conv);
        throw TemplateError(msg + "'");
    }
    Evaluator::CheckSize(out.size());
  }
  // Like CPython, a right operand that supports subscripting but is not a
  // tuple (list, dict, Jinja2's Undefined) never triggers this check.
  const bool mapping_like =
      !args.is_tuple() && (args.is_list() || args.is_dict() || args.is_undefined());
  if (!used_mapping && !mapping_like && next < positional.size()) {
    throw TemplateError("not all arguments converted during string formatting");
  }
  return out;
}

}  // namespace medq::chat
