// Methods of str, dict and list values (`s.strip()`, `d.items()`...), as the
// immutable sandbox transformers uses allows them: methods that would change
// a list or dict are refused.
#include <algorithm>
#include <cctype>

#include "daemon/template/builtins.h"
#include "daemon/template/evaluator.h"
#include "daemon/template/text_util.h"

namespace medq::chat {
namespace {

std::string StrArg(const Value* v, const char* fn) {
  if (v == nullptr || !v->is_string()) {
    throw TemplateError(std::string(fn) + "() argument must be str, not " +
                        (v == nullptr ? std::string("nothing") : v->TypeName()));
  }
  return v->as_string();
}

int64_t IntArg(const Value* v, int64_t fallback, const char* fn) {
  if (v == nullptr || v->is_none()) return fallback;
  if (v->is_int()) return v->as_int();
  if (v->is_bool()) return v->as_bool() ? 1 : 0;
  throw TemplateError(std::string(fn) + "() expects an integer, not " + v->TypeName());
}

Value Strip(const Value& self, const CallArgs& args, const char* fn, bool l, bool r) {
  ArgBinder a(fn, args, {"chars"});
  const Value* chars = a.Get(0);
  if (chars != nullptr && !chars->is_none()) {
    const std::string c = StrArg(chars, fn);
    return Value::Str(PyStrip(self.as_string(), &c, l, r));
  }
  return Value::Str(PyStrip(self.as_string(), nullptr, l, r));
}

Value AffixTest(const Value& self, const CallArgs& args, const char* fn, bool prefix) {
  ArgBinder a(fn, args, {"affix"});
  const Value* v = a.Get(0);
  List options;
  if (v != nullptr && v->is_list()) {
    options = v->as_list();
  } else {
    options.push_back(v != nullptr ? *v : Value());
  }
  const std::string& s = self.as_string();
  for (const Value& o : options) {
    const std::string x = StrArg(&o, fn);
    if (x.size() > s.size()) continue;
    if (prefix ? s.compare(0, x.size(), x) == 0
               : s.compare(s.size() - x.size(), x.size(), x) == 0) {
      return Value::Bool(true);
    }
  }
  return Value::Bool(false);
}

Value ToList(std::vector<std::string> parts) {
  List out;
  for (auto& p : parts)
    out.push_back(Value::Str(std::move(p)));
  return Value::MakeList(std::move(out));
}

Value Split(const Value& self, const CallArgs& args, bool right) {
  const char* fn = right ? "rsplit" : "split";
  ArgBinder a(fn, args, {"sep", "maxsplit"});
  const Value* sep = a.Get(0);
  const int64_t maxsplit = IntArg(a.Get(1), -1, fn);
  std::string sep_s;
  const std::string* sep_p = nullptr;
  if (sep != nullptr && !sep->is_none()) {
    sep_s = StrArg(sep, fn);
    if (sep_s.empty()) throw TemplateError("empty separator");
    sep_p = &sep_s;
  }
  if (!right || maxsplit < 0) return ToList(PySplit(self.as_string(), sep_p, maxsplit));
  // rsplit with a limit: split the reversed code points with the reversed separator.
  std::vector<char32_t> cps = DecodeUtf8(self.as_string());
  std::reverse(cps.begin(), cps.end());
  std::string rsep;
  if (sep_p != nullptr) {
    std::vector<char32_t> sc = DecodeUtf8(*sep_p);
    std::reverse(sc.begin(), sc.end());
    rsep = EncodeUtf8(sc);
  }
  std::vector<std::string> parts = PySplit(EncodeUtf8(cps), sep_p ? &rsep : nullptr, maxsplit);
  std::reverse(parts.begin(), parts.end());
  for (auto& p : parts) {
    std::vector<char32_t> pc = DecodeUtf8(p);
    std::reverse(pc.begin(), pc.end());
    p = EncodeUtf8(pc);
  }
  return ToList(std::move(parts));
}

// str.format with `{}`, `{0}`, `{name}` and `{{`/`}}`; format specs and
// conversions are refused rather than guessed.
Value Format(const Value& self, const CallArgs& args) {
  const std::string& f = self.as_string();
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '}') {
      if (i + 1 < f.size() && f[i + 1] == '}')
        ++i;
      else
        throw TemplateError("format(): single '}' encountered in format string");
      out.push_back('}');
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < f.size() && f[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    const size_t close = f.find('}', i);
    if (close == std::string::npos) throw TemplateError("format(): expected '}' before end");
    const std::string field = f.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) {
      throw TemplateError("format(): format specs, conversions and indexing are not supported");
    }
    const Value* v = nullptr;
    if (field.empty() || std::all_of(field.begin(), field.end(), ::isdigit)) {
      const size_t idx = field.empty() ? auto_index++ : std::stoul(field);
      if (idx >= args.positional.size()) {
        throw TemplateError("format(): replacement index " + std::to_string(idx) + " out of range");
      }
      v = &args.positional[idx];
    } else {
      for (const auto& [k, val] : args.keyword) {
        if (k == field) v = &val;
      }
      if (v == nullptr) throw TemplateError("format(): missing keyword argument '" + field + "'");
    }
    out += v->Str();
    i = close;
  }
  return Value::Str(std::move(out));
}

Value Count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return Value::Int(static_cast<int64_t>(CodePointCount(s)) + 1);
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size()))
    ++n;
  return Value::Int(n);
}

Value Find(const std::string& s, const std::string& sub, bool right) {
  const size_t at = right ? s.rfind(sub) : s.find(sub);
  if (at == std::string::npos) return Value::Int(-1);
  return Value::Int(static_cast<int64_t>(CodePointCount(s.substr(0, at))));
}

template <typename Pred>
Value AllChars(const std::string& s, Pred pred) {
  const std::vector<char32_t> cps = DecodeUtf8(s);
  if (cps.empty()) return Value::Bool(false);
  return Value::Bool(std::all_of(cps.begin(), cps.end(), pred));
}

Value StringMethod(const std::string& name, const Value& self, const CallArgs& args) {
  const std::string& s = self.as_string();
  const char* fn = name.c_str();
  if (name == "strip") return Strip(self, args, fn, true, true);
  if (name == "lstrip") return Strip(self, args, fn, true, false);
  if (name == "rstrip") return Strip(self, args, fn, false, true);
  if (name == "startswith") return AffixTest(self, args, fn, true);
  if (name == "endswith") return AffixTest(self, args, fn, false);
  if (name == "split") return Split(self, args, false);
  if (name == "rsplit") return Split(self, args, true);
  if (name == "format") return Format(self, args);
  if (name == "replace") {
    ArgBinder a(fn, args, {"old", "new", "count"});
    return Value::Str(
        PyReplace(s, StrArg(a.Get(0), fn), StrArg(a.Get(1), fn), IntArg(a.Get(2), -1, fn)));
  }
  if (name == "join") {
    ArgBinder a(fn, args, {"iterable"});
    std::string out;
    bool first = true;
    for (const Value& v : Iterate(a.GetOr(0, Value::MakeList()))) {
      if (!first) out += s;
      first = false;
      out += StrArg(&v, fn);
    }
    return Value::Str(std::move(out));
  }
  if (name == "count") {
    ArgBinder a(fn, args, {"sub"});
    return Count(s, StrArg(a.Get(0), fn));
  }
  if (name == "find" || name == "rfind") {
    ArgBinder a(fn, args, {"sub"});
    return Find(s, StrArg(a.Get(0), fn), name == "rfind");
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgBinder a(fn, args, {"affix"});
    const std::string x = StrArg(a.Get(0), fn);
    if (name == "removeprefix" && s.compare(0, x.size(), x) == 0)
      return Value::Str(s.substr(x.size()));
    if (name == "removesuffix" && x.size() <= s.size() && !x.empty() &&
        s.compare(s.size() - x.size(), x.size(), x) == 0) {
      return Value::Str(s.substr(0, s.size() - x.size()));
    }
    return self;
  }
  ArgBinder none(fn, args, {});
  if (name == "upper") return Value::Str(PyUpper(s));
  if (name == "lower") return Value::Str(PyLower(s));
  if (name == "title") return Value::Str(PyTitle(s));
  if (name == "capitalize") return Value::Str(PyCapitalize(s));
  if (name == "splitlines") return ToList(PySplitLines(s));
  if (name == "isspace") return AllChars(s, IsPyWhitespace);
  if (name == "isdigit") return AllChars(s, [](char32_t c) { return c >= '0' && c <= '9'; });
  if (name == "isalpha") return AllChars(s, IsPyAlpha);
  if (name == "isupper") return Value::Bool(PyUpper(s) == s && PyLower(s) != s);
  if (name == "islower") return Value::Bool(PyLower(s) == s && PyUpper(s) != s);
  throw TemplateError("'str' object has no attribute '" + name + "'");
}

Value DictMethod(const std::string& name, const Value& self, const CallArgs& args) {
  const Dict& d = self.as_dict();
  const char* fn = name.c_str();
  if (name == "get") {
    ArgBinder a(fn, args, {"key", "default"});
    if (a.Get(0) == nullptr) throw TemplateError("get() expected at least 1 argument");
    const Value* v = d.Find(*a.Get(0));
    return v != nullptr ? *v : a.GetOr(1, Value::None());
  }
  ArgBinder none(fn, args, {});
  List out;
  for (const auto& [k, v] : d.items) {
    if (name == "items") {
      out.push_back(Value::MakeTuple({k, v}));
    } else {
      out.push_back(name == "keys" ? k : v);
    }
  }
  return Value::MakeList(std::move(out));
}

Value ListMethod(const std::string& name, const Value& self, const CallArgs& args) {
  const List& l = self.as_list();
  ArgBinder a(name, args, {"value"});
  const Value x = a.GetOr(0, Value());
  if (name == "count") {
    return Value::Int(
        std::count_if(l.begin(), l.end(), [&](const Value& v) { return ValuesEqual(v, x); }));
  }
  for (size_t i = 0; i < l.size(); ++i) {
    if (ValuesEqual(l[i], x)) return Value::Int(static_cast<int64_t>(i));
  }
  throw TemplateError(x.Repr() + " is not in list");
}

bool IsOneOf(const std::string& name, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

Value GetMethod(const Value& self, const std::string& name) {
  Value (*impl)(const std::string&, const Value&, const CallArgs&) = nullptr;
  if (self.is_string() &&
      IsOneOf(name, {"strip",   "lstrip",  "rstrip",  "startswith",   "endswith",
                     "split",   "rsplit",  "format",  "replace",      "join",
                     "count",   "find",    "rfind",   "removeprefix", "removesuffix",
                     "upper",   "lower",   "title",   "capitalize",   "splitlines",
                     "isspace", "isdigit", "isalpha", "isupper",      "islower"})) {
    impl = StringMethod;
  } else if (self.is_dict() && IsOneOf(name, {"items", "keys", "values", "get"})) {
    impl = DictMethod;
  } else if (self.is_list() && IsOneOf(name, {"count", "index"})) {
    impl = ListMethod;
  } else if ((self.is_list() && IsOneOf(name, {"append", "extend", "insert", "pop", "remove",
                                               "reverse", "sort", "clear"})) ||
             (self.is_dict() &&
              IsOneOf(name, {"pop", "popitem", "setdefault", "update", "clear"}))) {
    const std::string type = self.TypeName();
    return Value::MakeCallable(name, [name, type](Evaluator&, CallArgs&) -> Value {
      throw TemplateError("access to attribute '" + name + "' of '" + type +
                          "' object is unsafe (templates cannot modify lists or dicts; use "
                          "namespace())");
    });
  } else {
    std::string hint(1, '\'');
    hint.append(self.TypeName()).append(" object' has no attribute '").append(name).append("'");
    return Value::Undef(std::move(hint));
  }
  return Value::MakeCallable(
      name, [impl, self, name](Evaluator&, CallArgs& args) { return impl(name, self, args); });
}

}  // namespace medq::chat
