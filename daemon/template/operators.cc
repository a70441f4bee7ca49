// Attribute/item access and binary operators, with Python semantics.
#include <cmath>
#include <limits>

#include "daemon/template/builtins.h"
#include "daemon/template/evaluator.h"
#include "daemon/template/text_util.h"

namespace medq::chat {

void FailUndefined(const Value& v) {
  const std::string& hint = v.is_undefined() ? v.undefined_hint() : std::string();
  throw TemplateError(hint.empty() ? "value is undefined" : hint);
}

namespace {

std::string ObjName(const Value& v) {
  // Built with append: GCC 12 misreports "'" + std::string&& under -Wrestrict.
  std::string s(1, '\'');
  s.append(v.TypeName()).append(" object'");
  return s;
}

}  // namespace

Value GetAttr(const Value& obj, const std::string& name) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      FailUndefined(obj);
    case Value::Kind::kNamespace: {
      const Value* v = obj.namespace_attrs().Find(std::string_view(name));
      if (v != nullptr) return *v;
      break;
    }
    case Value::Kind::kDict: {
      Value m = GetMethod(obj, name);
      if (!m.is_undefined()) return m;
      const Value* v = obj.as_dict().Find(std::string_view(name));
      if (v != nullptr) return *v;
      break;
    }
    case Value::Kind::kString:
    case Value::Kind::kList: {
      Value m = GetMethod(obj, name);
      if (!m.is_undefined()) return m;
      break;
    }
    default:
      break;
  }
  return Value::Undef(ObjName(obj) + " has no attribute '" + name + "'");
}

Value GetItem(const Value& obj, const Value& key) {
  switch (obj.kind()) {
    case Value::Kind::kUndefined:
      FailUndefined(obj);
    case Value::Kind::kDict: {
      const Value* v = obj.as_dict().Find(key);
      if (v != nullptr) return *v;
      break;
    }
    case Value::Kind::kList:
    case Value::Kind::kString: {
      if (!key.is_int() && !key.is_bool()) break;
      const int64_t raw = key.is_bool() ? (key.as_bool() ? 1 : 0) : key.as_int();
      if (obj.is_list()) {
        const List& l = obj.as_list();
        const int64_t n = static_cast<int64_t>(l.size());
        const int64_t i = raw < 0 ? raw + n : raw;
        if (i >= 0 && i < n) return l[static_cast<size_t>(i)];
      } else {
        const std::vector<char32_t> cps = DecodeUtf8(obj.as_string());
        const int64_t n = static_cast<int64_t>(cps.size());
        const int64_t i = raw < 0 ? raw + n : raw;
        if (i >= 0 && i < n) {
          std::string s;
          AppendUtf8(cps[static_cast<size_t>(i)], s);
          return Value::Str(std::move(s));
        }
      }
      return Value::Undef(ObjName(obj) + " has no element " + std::to_string(raw));
    }
    default:
      break;
  }
  // As Jinja2: a failed subscript with a string falls back to the attribute.
  if (key.is_string()) return GetAttr(obj, key.as_string());
  return Value::Undef(ObjName(obj) + " has no element " + key.Repr());
}

namespace {

int64_t AsInt(const Value& v) {
  return v.is_bool() ? (v.as_bool() ? 1 : 0) : v.as_int();
}

[[noreturn]] void Unsupported(const std::string& op, const Value& a, const Value& b) {
  throw TemplateError("unsupported operand type(s) for " + op + ": '" + a.TypeName() + "' and '" +
                      b.TypeName() + "'");
}

Value Repeat(const Value& seq, int64_t times) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const std::string& s = seq.as_string();
    Evaluator::CheckSize(s.size() * static_cast<size_t>(times));
    std::string out;
    for (int64_t i = 0; i < times; ++i)
      out += s;
    return Value::Str(std::move(out));
  }
  const List& l = seq.as_list();
  Evaluator::CheckSize(l.size() * static_cast<size_t>(times));
  List out;
  for (int64_t i = 0; i < times; ++i)
    out.insert(out.end(), l.begin(), l.end());
  return Value::MakeList(std::move(out));
}

Value Arith(const std::string& op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) Unsupported(op, a, b);
  if (a.is_float() || b.is_float()) {
    const double x = a.ToDouble();
    const double y = b.ToDouble();
    if (op == "+") return Value::Float(x + y);
    if (op == "-") return Value::Float(x - y);
    if (op == "*") return Value::Float(x * y);
    if (op == "**") return Value::Float(std::pow(x, y));
    if (y == 0.0) throw TemplateError("float division by zero");
    if (op == "/") return Value::Float(x / y);
    if (op == "//") return Value::Float(std::floor(x / y));
    double m = std::fmod(x, y);
    if (m != 0.0 && ((m < 0) != (y < 0))) m += y;
    return Value::Float(m);
  }
  const int64_t x = AsInt(a);
  const int64_t y = AsInt(b);
  int64_t r = 0;
  if (op == "+") {
    if (__builtin_add_overflow(x, y, &r)) throw TemplateError("integer overflow");
    return Value::Int(r);
  }
  if (op == "-") {
    if (__builtin_sub_overflow(x, y, &r)) throw TemplateError("integer overflow");
    return Value::Int(r);
  }
  if (op == "*") {
    if (__builtin_mul_overflow(x, y, &r)) throw TemplateError("integer overflow");
    return Value::Int(r);
  }
  if (op == "**") {
    if (y < 0) return Value::Float(std::pow(static_cast<double>(x), static_cast<double>(y)));
    int64_t result = 1;
    for (int64_t i = 0; i < y; ++i) {
      if (__builtin_mul_overflow(result, x, &result)) throw TemplateError("integer overflow");
      if (result == 0 || result == 1) break;
    }
    return Value::Int(result);
  }
  if (op == "/") {
    if (y == 0) throw TemplateError("division by zero");
    return Value::Float(static_cast<double>(x) / static_cast<double>(y));
  }
  if (y == 0) throw TemplateError("integer division or modulo by zero");
  if (x == INT64_MIN && y == -1) throw TemplateError("integer overflow");
  int64_t q = x / y;
  int64_t m = x % y;
  if (m != 0 && ((m < 0) != (y < 0))) {
    --q;
    m += y;
  }
  return Value::Int(op == "//" ? q : m);
}

int Compare(const std::string& op, const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.ToDouble();
      const double y = b.ToDouble();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    const int64_t x = AsInt(a);
    const int64_t y = AsInt(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    const int c = a.as_string().compare(b.as_string());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list()) {
    const List& x = a.as_list();
    const List& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (ValuesEqual(x[i], y[i])) continue;
      return Compare(op, x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw TemplateError("'" + op + "' not supported between instances of '" + a.TypeName() +
                      "' and '" + b.TypeName() + "'");
}

bool Contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string()) {
        throw TemplateError("'in <string>' requires string as left operand, not " +
                            item.TypeName());
      }
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Kind::kList:
      for (const Value& v : container.as_list()) {
        if (ValuesEqual(v, item)) return true;
      }
      return false;
    case Value::Kind::kDict:
      if ((item.is_list() && !item.is_tuple()) || item.is_dict() || item.is_namespace()) {
        throw TemplateError("unhashable type: '" + item.TypeName() + "'");
      }
      return container.as_dict().Find(item) != nullptr;
    default:
      throw TemplateError("argument of type '" + container.TypeName() + "' is not iterable");
  }
}

}  // namespace

Value BinaryOp(const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = a.Str();
    s += b.Str();
    Evaluator::CheckSize(s.size());
    return Value::Str(std::move(s));
  }
  if (op == "==") return Value::Bool(ValuesEqual(a, b));
  if (op == "!=") return Value::Bool(!ValuesEqual(a, b));
  if (op == "in") return Value::Bool(Contains(b, a));
  if (op == "not in") return Value::Bool(!Contains(b, a));
  // str % x is Python's formatting, which accepts any right operand.
  if (op == "%" && a.is_string()) return Value::Str(PercentFormat(a.as_string(), b));
  if (a.is_undefined()) FailUndefined(a);
  if (b.is_undefined()) FailUndefined(b);
  if (op == "<") return Value::Bool(Compare(op, a, b) < 0);
  if (op == "<=") return Value::Bool(Compare(op, a, b) <= 0);
  if (op == ">") return Value::Bool(Compare(op, a, b) > 0);
  if (op == ">=") return Value::Bool(Compare(op, a, b) >= 0);
  if (op == "+") {
    if (a.is_string() && b.is_string()) {
      Evaluator::CheckSize(a.as_string().size() + b.as_string().size());
      return Value::Str(a.as_string() + b.as_string());
    }
    if (a.is_list() && b.is_list()) {
      if (a.is_tuple() != b.is_tuple()) {
        throw TemplateError("can only concatenate " + a.TypeName() + " (not \"" + b.TypeName() +
                            "\") to " + a.TypeName());
      }
      Evaluator::CheckSize(a.as_list().size() + b.as_list().size());
      List out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return a.is_tuple() ? Value::MakeTuple(std::move(out)) : Value::MakeList(std::move(out));
    }
    if (a.is_string() || b.is_string()) {
      if (a.is_string()) {
        throw TemplateError("can only concatenate str (not \"" + b.TypeName() + "\") to str");
      }
      Unsupported(op, a, b);
    }
  }
  if (op == "*") {
    if ((a.is_string() || a.is_list()) && (b.is_int() || b.is_bool())) return Repeat(a, AsInt(b));
    if ((b.is_string() || b.is_list()) && (a.is_int() || a.is_bool())) return Repeat(b, AsInt(a));
  }

  return Arith(op, a, b);
}

}  // namespace medq::chat
