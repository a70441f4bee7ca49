#include "daemon/template/json_dump.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "daemon/template/template_error.h"
#include "daemon/template/text_util.h"

namespace medq::chat {
namespace {

void AppendHex4(unsigned v, std::string& out) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\u%04x", v & 0xffffu);
  out += buf;
}

void DumpString(const std::string& s, bool ensure_ascii, std::string& out) {
  out.push_back('"');
  for (char32_t cp : DecodeUtf8(s)) {
    switch (cp) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (cp < 0x20) {
          AppendHex4(static_cast<unsigned>(cp), out);
        } else if (ensure_ascii && cp > 0x7f) {
          if (cp >= 0x10000) {
            const char32_t v = cp - 0x10000;
            AppendHex4(static_cast<unsigned>(0xd800 | (v >> 10)), out);
            AppendHex4(static_cast<unsigned>(0xdc00 | (v & 0x3ff)), out);
          } else {
            AppendHex4(static_cast<unsigned>(cp), out);
          }
        } else {
          AppendUtf8(cp, out);
        }
    }
  }
  out.push_back('"');
}

std::string FloatJson(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
  return PyReprFloat(d);
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o) : o_(o) {
    item_sep_ = o.item_separator.value_or(o.indent ? "," : ", ");
    key_sep_ = o.key_separator.value_or(": ");
  }

  void Dump(const Value& v, int depth, std::string& out) {
    if (depth > kMaxNestingDepth) {
      throw TemplateError("tojson: value is nested too deeply (or contains itself)");
    }
    switch (v.kind()) {
      case Value::Kind::kNone:
        out += "null";
        return;
      case Value::Kind::kBool:
        out += v.as_bool() ? "true" : "false";
        return;
      case Value::Kind::kInt:
        out += std::to_string(v.as_int());
        return;
      case Value::Kind::kFloat:
        out += FloatJson(v.as_float());
        return;
      case Value::Kind::kString:
        DumpString(v.as_string(), o_.ensure_ascii, out);
        return;
      case Value::Kind::kList:
        DumpList(v.as_list(), depth, out);
        return;
      case Value::Kind::kDict:
        DumpDict(v.as_dict(), depth, out);
        return;
      default:
        throw TemplateError("tojson: Object of type " + v.TypeName() + " is not JSON serializable");
    }
  }

 private:
  void NewLine(int level, std::string& out) {
    if (!o_.indent) return;
    out.push_back('\n');
    for (int i = 0; i < level; ++i)
      out += *o_.indent;
  }

  void DumpList(const List& items, int depth, std::string& out) {
    if (items.empty()) {
      out += "[]";
      return;
    }
    out.push_back('[');
    for (size_t i = 0; i < items.size(); ++i) {
      if (i > 0) out += item_sep_;
      NewLine(depth + 1, out);
      Dump(items[i], depth + 1, out);
    }
    NewLine(depth, out);
    out.push_back(']');
  }

  std::string KeyString(const Value& k) {
    switch (k.kind()) {
      case Value::Kind::kString:
        return k.as_string();
      case Value::Kind::kBool:
        return k.as_bool() ? "true" : "false";
      case Value::Kind::kNone:
        return "null";
      case Value::Kind::kInt:
        return std::to_string(k.as_int());
      case Value::Kind::kFloat:
        return FloatJson(k.as_float());
      default:
        throw TemplateError("tojson: keys must be str, int, float, bool or None, not " +
                            k.TypeName());
    }
  }

  void DumpDict(const Dict& d, int depth, std::string& out) {
    if (d.items.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    entries.reserve(d.items.size());
    for (const auto& [k, v] : d.items)
      entries.emplace_back(KeyString(k), &v);
    if (o_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    out.push_back('{');
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i > 0) out += item_sep_;
      NewLine(depth + 1, out);
      DumpString(entries[i].first, o_.ensure_ascii, out);
      out += key_sep_;
      Dump(*entries[i].second, depth + 1, out);
    }
    NewLine(depth, out);
    out.push_back('}');
  }

  const JsonDumpOptions& o_;
  std::string item_sep_;
  std::string key_sep_;
};

}  // namespace

std::string JsonDump(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  Dumper(options).Dump(v, 0, out);
  return out;
}

}  // namespace medq::chat
