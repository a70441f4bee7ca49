// Jinja2's filters, with transformers' own `tojson` (json.dumps with
// ensure_ascii=False, no HTML escaping).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "daemon/template/builtins.h"
#include "daemon/template/evaluator.h"
#include "daemon/template/json_dump.h"
#include "daemon/template/text_util.h"

namespace medq::chat {
namespace {

// Jinja2's make_attrgetter: "a.b.0" walks items (then attributes) part by part.
Value GetPath(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return GetItem(item, attribute);
  Value cur = item;
  size_t start = 0;
  const std::string& path = attribute.as_string();
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part =
        path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = GetItem(cur, digits ? Value::Int(std::atoll(part.c_str())) : Value::Str(part));
    if (dot == std::string::npos) return cur;
    start = dot + 1;
  }
}

// Sort/unique key: strings compare case-insensitively unless asked otherwise.
Value SortKey(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value::Str(PyLower(v.as_string()));
  return v;
}

bool Less(const Value& a, const Value& b) {
  return BinaryOp("<", a, b).Truthy();
}

bool BoolArg(const ArgBinder& a, size_t i) {
  const Value* v = a.Get(i);
  return v != nullptr && v->Truthy();
}

Value Sorted(const Value& input, const ArgBinder& a, size_t reverse_i, size_t cs_i, size_t attr_i) {
  List items = Iterate(input);
  const bool reverse = BoolArg(a, reverse_i);
  const bool cs = BoolArg(a, cs_i);
  const Value* attr = a.Get(attr_i);
  std::vector<std::pair<Value, Value>> keyed;
  for (Value& v : items) {
    Value k = attr != nullptr && !attr->is_none() ? GetPath(v, *attr) : v;
    keyed.emplace_back(SortKey(k, cs), std::move(v));
  }
  std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& x, const auto& y) {
    return reverse ? Less(y.first, x.first) : Less(x.first, y.first);
  });
  List out;
  for (auto& [k, v] : keyed)
    out.push_back(std::move(v));
  return Value::MakeList(std::move(out));
}

std::string Indent(const Value& input, const Value& width, bool first, bool blank) {
  // Jinja2 appends "\n" to the value itself, so anything but a string fails.
  if (input.is_undefined()) FailUndefined(input);
  if (!input.is_string()) {
    throw TemplateError("indent(): unsupported operand type(s) for +=: '" + input.TypeName() +
                        "' and 'str'");
  }
  const std::string& s = input.as_string();
  std::string ind;
  if (width.is_string()) {
    ind = width.as_string();
  } else if (width.is_int() || width.is_bool()) {
    const int64_t n = width.is_bool() ? (width.as_bool() ? 1 : 0) : width.as_int();
    ind.assign(static_cast<size_t>(std::clamp<int64_t>(n, 0, 1 << 16)), ' ');
  } else {
    throw TemplateError("indent(): width must be an integer or a string");
  }
  const std::vector<std::string> lines = PySplitLines(s + "\n");
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i > 0) rv += "\n" + ind;
      rv += lines[i];
    }
  } else if (!lines.empty()) {
    rv = lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += ind;
      rv += lines[i];
    }
  }
  if (first) rv = ind + rv;
  Evaluator::CheckSize(rv.size());
  return rv;
}

Value ToInt(const Value& v, const Value& fallback, int base) {
  if (v.is_undefined()) FailUndefined(v);  // int(Undefined) raises in Jinja2
  if (v.is_int()) return v;
  if (v.is_bool()) return Value::Int(v.as_bool() ? 1 : 0);
  if (v.is_float()) {
    if (!std::isfinite(v.as_float())) throw TemplateError("cannot convert float to integer");
    return Value::Int(static_cast<int64_t>(v.as_float()));
  }
  if (v.is_string()) {
    std::string s = PyStrip(v.as_string(), nullptr, true, true);
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (!s.empty()) {
      errno = 0;
      char* end = nullptr;
      const long long i = std::strtoll(s.c_str(), &end, base);
      if (errno == 0 && end != nullptr && *end == '\0') return Value::Int(i);
      end = nullptr;
      const double d = std::strtod(s.c_str(), &end);
      if (end != nullptr && *end == '\0' && std::isfinite(d)) {
        return Value::Int(static_cast<int64_t>(d));
      }
    }
  }
  return fallback;
}

Value ToFloat(const Value& v, const Value& fallback) {
  if (v.is_undefined()) FailUndefined(v);
  if (v.is_number()) return Value::Float(v.ToDouble());
  if (v.is_string()) {
    const std::string s = PyStrip(v.as_string(), nullptr, true, true);
    char* end = nullptr;
    const double d = std::strtod(s.c_str(), &end);
    if (!s.empty() && end != nullptr && *end == '\0') return Value::Float(d);
  }
  return fallback;
}

Value Round(const Value& v, int64_t precision, const std::string& method) {
  if (!v.is_number()) throw TemplateError("round(): value must be a number");
  const double x = v.ToDouble();
  if (method == "common" && !v.is_float()) {
    // Python's round() of an int (or bool) with ndigits is an int.
    return Value::Int(v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int());
  }
  if (method == "common") {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f",
                  static_cast<int>(std::clamp<int64_t>(precision, 0, 300)), x);
    return Value::Float(std::strtod(buf, nullptr));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  if (method == "ceil") return Value::Float(std::ceil(x * scale) / scale);
  if (method == "floor") return Value::Float(std::floor(x * scale) / scale);
  throw TemplateError("round(): method must be 'common', 'ceil' or 'floor'");
}

std::string HtmlEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Value ToJson(const Value& v, const CallArgs& args) {
  ArgBinder a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = BoolArg(a, 0);
  o.sort_keys = BoolArg(a, 3);
  if (const Value* ind = a.Get(1); ind != nullptr && !ind->is_none()) {
    if (ind->is_string()) {
      o.indent = ind->as_string();
    } else if (ind->is_int()) {
      o.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(ind->as_int(), 0, 1024)), ' ');
    } else {
      throw TemplateError("tojson(): indent must be an integer or a string");
    }
  }
  if (const Value* sep = a.Get(2); sep != nullptr && !sep->is_none()) {
    if (!sep->is_list() || sep->as_list().size() != 2 || !sep->as_list()[0].is_string() ||
        !sep->as_list()[1].is_string()) {
      throw TemplateError("tojson(): separators must be a pair of strings");
    }
    o.item_separator = sep->as_list()[0].as_string();
    o.key_separator = sep->as_list()[1].as_string();
  }
  std::string out = JsonDump(v, o);
  Evaluator::CheckSize(out.size());
  return Value::Str(std::move(out));
}

// select/reject/selectattr/rejectattr.
Value SelectFilter(Evaluator& ev, const Value& input, const CallArgs& args, bool by_attr,
                   bool keep_when) {
  size_t next = 0;
  Value attr;
  if (by_attr) {
    if (args.positional.empty()) throw TemplateError("selectattr/rejectattr need an attribute");
    attr = args.positional[next++];
  }
  std::string test;
  CallArgs test_args;
  if (next < args.positional.size()) {
    if (!args.positional[next].is_string()) throw TemplateError("test name must be a string");
    test = args.positional[next++].as_string();
    test_args.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(next),
                                args.positional.end());
    test_args.keyword = args.keyword;
  }
  List out;
  if (!input.Truthy()) return Value::MakeList();  // Jinja2: `if value:` before iterating
  for (const Value& item : Iterate(input)) {
    const Value subject = by_attr ? GetPath(item, attr) : item;
    const bool r = test.empty() ? subject.Truthy() : ApplyTest(ev, test, subject, test_args);
    if (r == keep_when) out.push_back(item);
  }
  return Value::MakeList(std::move(out));
}

Value MapFilter(Evaluator& ev, const Value& input, const CallArgs& args) {
  List out;
  if (!input.Truthy()) return Value::MakeList();  // Jinja2: `if value:` before iterating
  if (args.positional.empty()) {
    ArgBinder a("map", args, {"attribute", "default"});
    if (a.Get(0) == nullptr) throw TemplateError("map requires a filter argument");
    for (const Value& item : Iterate(input)) {
      Value v = GetPath(item, *a.Get(0));
      if (v.is_undefined() && a.Get(1) != nullptr) v = *a.Get(1);
      out.push_back(std::move(v));
    }
    return Value::MakeList(std::move(out));
  }
  if (!args.positional[0].is_string()) throw TemplateError("map: filter name must be a string");
  const std::string name = args.positional[0].as_string();
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : Iterate(input))
    out.push_back(ApplyFilter(ev, name, item, rest));
  return Value::MakeList(std::move(out));
}

Value MinMax(const Value& input, const CallArgs& args, bool want_max) {
  ArgBinder a(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  const bool cs = BoolArg(a, 0);
  const Value* attr = a.Get(1);
  const List items = Iterate(input);
  if (items.empty()) return Value::Undef("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key;
  for (size_t i = 0; i < items.size(); ++i) {
    Value k =
        SortKey(attr != nullptr && !attr->is_none() ? GetPath(items[i], *attr) : items[i], cs);
    if (i == 0 || (want_max ? Less(best_key, k) : Less(k, best_key))) {
      best = i;
      best_key = k;
    }
  }
  return items[best];
}

using FilterFn = Value (*)(Evaluator&, const Value&, const CallArgs&);

struct FilterEntry {
  const char* name;
  FilterFn fn;
};

Value NoArgs(const char* name, const CallArgs& args) {
  ArgBinder a(name, args, {});
  return Value();
}

const FilterEntry kFilters[] = {
    {"abs",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("abs", args);
       if (v.is_float()) return Value::Float(std::fabs(v.as_float()));
       if (v.is_int() || v.is_bool()) {
         const int64_t i = v.is_bool() ? v.as_bool() : v.as_int();
         if (i == INT64_MIN) throw TemplateError("integer overflow");
         return Value::Int(i < 0 ? -i : i);
       }
       throw TemplateError("bad operand type for abs(): '" + v.TypeName() + "'");
     }},
    {"attr",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("attr", args, {"name"});
       if (a.Get(0) == nullptr || !a.Get(0)->is_string()) throw TemplateError("attr needs a name");
       // Only attributes, never items: a dict's keys are not its attributes.
       const std::string& name = a.Get(0)->as_string();
       if (v.is_dict()) {
         Value m = GetMethod(v, name);
         return m.is_undefined() ? Value::Undef("'dict object' has no attribute '" + name + "'")
                                 : m;
       }
       return GetAttr(v, name);
     }},
    {"capitalize",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("capitalize", args);
       return Value::Str(PyCapitalize(v.Str()));
     }},
    {"count",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("count", args);
       return Value::Int(Length(v));
     }},
    {"default",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("default", args, {"default_value", "boolean"});
       const bool use = v.is_undefined() || (BoolArg(a, 1) && !v.Truthy());
       return use ? a.GetOr(0, Value::Str("")) : v;
     }},
    {"dictsort",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("dictsort", args, {"case_sensitive", "by", "reverse"});
       if (!v.is_dict()) throw TemplateError("dictsort(): value must be a dict");
       const bool cs = BoolArg(a, 0);
       const Value by = a.GetOr(1, Value::Str("key"));
       if (!by.is_string() || (by.as_string() != "key" && by.as_string() != "value")) {
         throw TemplateError("dictsort(): 'by' must be 'key' or 'value'");
       }
       const size_t pos = by.as_string() == "key" ? 0 : 1;
       const bool reverse = BoolArg(a, 2);
       List items;
       for (const auto& [k, val] : v.as_dict().items)
         items.push_back(Value::MakeTuple({k, val}));
       std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
         const Value kx = SortKey(x.as_list()[pos], cs);
         const Value ky = SortKey(y.as_list()[pos], cs);
         return reverse ? Less(ky, kx) : Less(kx, ky);
       });
       return Value::MakeList(std::move(items));
     }},
    {"escape",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("escape", args);
       return Value::Str(HtmlEscape(v.Str()));
     }},
    {"first",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("first", args);
       const List items = Iterate(v);
       if (items.empty()) return Value::Undef("No first item, sequence was empty.");
       return items.front();
     }},
    {"float",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("float", args, {"default"});
       return ToFloat(v, a.GetOr(0, Value::Float(0.0)));
     }},
    {"format",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       // Jinja2: soft_str(value) % (kwargs or args).
       if (!args.keyword.empty()) {
         Dict d;
         for (const auto& [k, val] : args.keyword)
           d.Set(Value::Str(k), val);
         return Value::Str(PercentFormat(v.Str(), Value::MakeDict(std::move(d))));
       }
       return Value::Str(PercentFormat(v.Str(), Value::MakeTuple(args.positional)));
     }},
    {"indent",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("indent", args, {"width", "first", "blank"});
       return Value::Str(Indent(v, a.GetOr(0, Value::Int(4)), BoolArg(a, 1), BoolArg(a, 2)));
     }},
    {"int",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("int", args, {"default", "base"});
       const Value base = a.GetOr(1, Value::Int(10));
       if (!base.is_int() || base.as_int() < 2 || base.as_int() > 36) {
         throw TemplateError("int(): base must be an integer from 2 to 36");
       }
       return ToInt(v, a.GetOr(0, Value::Int(0)), static_cast<int>(base.as_int()));
     }},
    {"items",
     [](Evaluator& ev, const Value& v, const CallArgs& args) -> Value {
       NoArgs("items", args);
       if (v.is_undefined()) return Value::MakeList();
       if (!v.is_dict()) throw TemplateError("Can only get item pairs from a mapping.");
       CallArgs none;
       return ev.Call(GetMethod(v, "items"), none);
     }},
    {"join",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("join", args, {"d", "attribute"});
       const std::string sep = a.GetOr(0, Value::Str("")).Str();
       const Value* attr = a.Get(1);
       std::string out;
       bool first = true;
       for (const Value& item : Iterate(v)) {
         if (!first) out += sep;
         first = false;
         out += (attr != nullptr && !attr->is_none() ? GetPath(item, *attr) : item).Str();
         Evaluator::CheckSize(out.size());
       }
       return Value::Str(std::move(out));
     }},
    {"last",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("last", args);
       const List items = Iterate(v);
       if (items.empty()) return Value::Undef("No last item, sequence was empty.");
       return items.back();
     }},
    {"length",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("length", args);
       return Value::Int(Length(v));
     }},
    {"list",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("list", args);
       return Value::MakeList(Iterate(v));
     }},
    {"lower",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("lower", args);
       return Value::Str(PyLower(v.Str()));
     }},
    {"map", MapFilter},
    {"max", [](Evaluator&, const Value& v, const CallArgs& args) { return MinMax(v, args, true); }},
    {"min",
     [](Evaluator&, const Value& v, const CallArgs& args) { return MinMax(v, args, false); }},
    {"reject", [](Evaluator& ev, const Value& v,
                  const CallArgs& args) { return SelectFilter(ev, v, args, false, false); }},
    {"rejectattr", [](Evaluator& ev, const Value& v,
                      const CallArgs& args) { return SelectFilter(ev, v, args, true, false); }},
    {"replace",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("replace", args, {"old", "new", "count"});
       if (a.Get(0) == nullptr || a.Get(1) == nullptr)
         throw TemplateError("replace needs old and new");
       const Value count = a.GetOr(2, Value::None());
       std::string out = PyReplace(v.Str(), a.Get(0)->Str(), a.Get(1)->Str(),
                                   count.is_int() ? count.as_int() : -1);
       Evaluator::CheckSize(out.size());
       return Value::Str(std::move(out));
     }},
    {"reverse",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("reverse", args);
       if (v.is_string()) {
         std::vector<char32_t> cps = DecodeUtf8(v.as_string());
         std::reverse(cps.begin(), cps.end());
         return Value::Str(EncodeUtf8(cps));
       }
       List items = Iterate(v);
       std::reverse(items.begin(), items.end());
       return Value::MakeList(std::move(items));
     }},
    {"round",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("round", args, {"precision", "method"});
       const Value p = a.GetOr(0, Value::Int(0));
       const Value m = a.GetOr(1, Value::Str("common"));
       if (!p.is_int() || !m.is_string()) throw TemplateError("round(): bad arguments");
       return Round(v, p.as_int(), m.as_string());
     }},
    {"safe",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("safe", args);
       return v;
     }},
    {"select", [](Evaluator& ev, const Value& v,
                  const CallArgs& args) { return SelectFilter(ev, v, args, false, true); }},
    {"selectattr", [](Evaluator& ev, const Value& v,
                      const CallArgs& args) { return SelectFilter(ev, v, args, true, true); }},
    {"sort",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("sort", args, {"reverse", "case_sensitive", "attribute"});
       return Sorted(v, a, 0, 1, 2);
     }},
    {"string",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("string", args);
       return Value::Str(v.Str());
     }},
    {"sum",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("sum", args, {"attribute", "start"});
       Value total = a.GetOr(1, Value::Int(0));
       const Value* attr = a.Get(0);
       for (const Value& item : Iterate(v)) {
         total = BinaryOp("+", total,
                          attr != nullptr && !attr->is_none() ? GetPath(item, *attr) : item);
       }
       return total;
     }},
    {"title",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("title", args);
       // Jinja2 splits before runs of '-', whitespace and opening brackets and
       // upper-cases the first character of every piece, lower-casing the rest.
       const std::vector<char32_t> cps = DecodeUtf8(v.Str());
       auto is_sep = [](char32_t c) {
         return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || IsPyWhitespace(c);
       };
       std::string out;
       size_t i = 0;
       while (i < cps.size()) {
         size_t j = i;
         const bool sep = is_sep(cps[i]);
         while (j < cps.size() && is_sep(cps[j]) == sep)
           ++j;
         std::vector<char32_t> piece(cps.begin() + static_cast<std::ptrdiff_t>(i),
                                     cps.begin() + static_cast<std::ptrdiff_t>(j));
         out += PyUpper(EncodeUtf8({piece[0]}));
         out += PyLower(EncodeUtf8(std::vector<char32_t>(piece.begin() + 1, piece.end())));
         i = j;
       }
       return Value::Str(std::move(out));
     }},
    {"tojson", [](Evaluator&, const Value& v, const CallArgs& args) { return ToJson(v, args); }},
    {"trim",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("trim", args, {"chars"});
       const Value* chars = a.Get(0);
       if (chars != nullptr && !chars->is_none()) {
         const std::string c = chars->Str();
         return Value::Str(PyStrip(v.Str(), &c, true, true));
       }
       return Value::Str(PyStrip(v.Str(), nullptr, true, true));
     }},
    {"unique",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       ArgBinder a("unique", args, {"case_sensitive", "attribute"});
       const bool cs = BoolArg(a, 0);
       const Value* attr = a.Get(1);
       List seen;
       List out;
       for (const Value& item : Iterate(v)) {
         const Value k =
             SortKey(attr != nullptr && !attr->is_none() ? GetPath(item, *attr) : item, cs);
         if (std::none_of(seen.begin(), seen.end(),
                          [&](const Value& s) { return ValuesEqual(s, k); })) {
           seen.push_back(k);
           out.push_back(item);
         }
       }
       return Value::MakeList(std::move(out));
     }},
    {"upper",
     [](Evaluator&, const Value& v, const CallArgs& args) -> Value {
       NoArgs("upper", args);
       return Value::Str(PyUpper(v.Str()));
     }},
};

const FilterEntry* FindFilter(const std::string& name) {
  const std::string canonical = name == "d" ? "default" : name == "e" ? "escape" : name;
  for (const FilterEntry& f : kFilters) {
    if (canonical == f.name) return &f;
  }
  return nullptr;
}

}  // namespace

bool HasFilter(const std::string& name) {
  return FindFilter(name) != nullptr;
}

Value ApplyFilter(Evaluator& ev, const std::string& name, const Value& input,
                  const CallArgs& args) {
  const FilterEntry* f = FindFilter(name);
  if (f == nullptr) throw TemplateError("no filter named '" + name + "'");
  return f->fn(ev, input, args);
}

}  // namespace medq::chat
