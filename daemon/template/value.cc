#include "daemon/template/value.h"

#include "daemon/template/template_error.h"
#include "daemon/template/text_util.h"

namespace medq::chat {

Value Value::MakeDict() {
  return Make<std::shared_ptr<Dict>>(std::make_shared<Dict>());
}

Value Value::MakeDict(Dict d) {
  return Make<std::shared_ptr<Dict>>(std::make_shared<Dict>(std::move(d)));
}

Value Value::MakeNamespace() {
  return Make<Namespace>(Namespace{std::make_shared<Dict>()});
}

Value Value::MakeCallable(std::string name, std::function<Value(Evaluator&, CallArgs&)> fn) {
  return Make<std::shared_ptr<Callable>>(
      std::make_shared<Callable>(Callable{std::move(name), std::move(fn)}));
}

double Value::ToDouble() const {
  switch (kind()) {
    case Kind::kBool:
      return as_bool() ? 1.0 : 0.0;
    case Kind::kInt:
      return static_cast<double>(as_int());
    case Kind::kFloat:
      return as_float();
    default:
      return 0.0;
  }
}

bool Value::Truthy() const {
  switch (kind()) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return as_bool();
    case Kind::kInt:
      return as_int() != 0;
    case Kind::kFloat:
      return as_float() != 0.0;
    case Kind::kString:
      return !as_string().empty();
    case Kind::kList:
      return !as_list().empty();
    case Kind::kDict:
      return !as_dict().items.empty();
    case Kind::kNamespace:
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string Value::Str() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return as_string();
    default:
      return Repr();
  }
}

std::string Value::Repr(int depth) const {
  if (depth > kMaxNestingDepth) {
    throw TemplateError("value is nested too deeply (or contains itself) to be printed");
  }
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return as_bool() ? "True" : "False";
    case Kind::kInt:
      return std::to_string(as_int());
    case Kind::kFloat:
      return PyReprFloat(as_float());
    case Kind::kString:
      return PyReprString(as_string());
    case Kind::kList: {
      std::string out = tuple_ ? "(" : "[";
      bool first = true;
      for (const Value& v : as_list()) {
        if (!first) out += ", ";
        first = false;
        out += v.Repr(depth + 1);
      }
      if (tuple_) return out + (as_list().size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kDict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, v] : as_dict().items) {
        if (!first) out += ", ";
        first = false;
        out += k.Repr(depth + 1) + ": " + v.Repr(depth + 1);
      }
      return out + "}";
    }
    case Kind::kNamespace: {
      Value attrs = MakeDict(namespace_attrs());
      return "<Namespace " + attrs.Repr(depth + 1) + ">";
    }
    case Kind::kCallable:
      return "<function " + as_callable().name + ">";
  }
  return "";
}

std::string Value::TypeName() const {
  switch (kind()) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "NoneType";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "str";
    case Kind::kList:
      return tuple_ ? "tuple" : "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "Namespace";
    case Kind::kCallable:
      return "function";
  }
  return "object";
}

const Value* Dict::Find(const Value& key) const {
  for (const auto& [k, v] : items) {
    if (ValuesEqual(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::Find(std::string_view key) const {
  for (const auto& [k, v] : items) {
    if (k.is_string() && k.as_string() == key) return &v;
  }
  return nullptr;
}

void Dict::Set(Value key, Value value) {
  for (auto& [k, v] : items) {
    if (ValuesEqual(k, key)) {
      v = std::move(value);
      return;
    }
  }
  items.emplace_back(std::move(key), std::move(value));
}

bool ValuesEqual(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.ToDouble() == b.ToDouble();
    const int64_t x = a.is_bool() ? (a.as_bool() ? 1 : 0) : a.as_int();
    const int64_t y = b.is_bool() ? (b.as_bool() ? 1 : 0) : b.as_int();
    return x == y;
  }
  if (a.kind() != b.kind() || a.is_tuple() != b.is_tuple()) return false;
  switch (a.kind()) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return a.as_string() == b.as_string();
    case Value::Kind::kList: {
      const List& x = a.as_list();
      const List& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!ValuesEqual(x[i], y[i])) return false;
      }
      return true;
    }
    case Value::Kind::kDict: {
      const Dict& x = a.as_dict();
      const Dict& y = b.as_dict();
      if (x.items.size() != y.items.size()) return false;
      for (const auto& [k, v] : x.items) {
        const Value* other = y.Find(k);
        if (other == nullptr || !ValuesEqual(v, *other)) return false;
      }
      return true;
    }
    case Value::Kind::kNamespace:
      return &a.namespace_attrs() == &b.namespace_attrs();
    case Value::Kind::kCallable:
      return &a.as_callable() == &b.as_callable();
    default:
      return false;
  }
}

Value FromJson(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth) {
    throw TemplateError("input JSON is nested deeper than " + std::to_string(kMaxJsonDepth) +
                        " levels");
  }
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return Value::None();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::Float(static_cast<double>(u));
      return Value::Int(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::Str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      items.reserve(j.size());
      for (const auto& e : j)
        items.push_back(FromJson(e, depth + 1));
      return Value::MakeList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      d.items.reserve(j.size());
      for (const auto& [k, v] : j.items())
        d.items.emplace_back(Value::Str(k), FromJson(v, depth + 1));
      return Value::MakeDict(std::move(d));
    }
    case nlohmann::ordered_json::value_t::binary:
      return Value::None();
  }
  return Value::None();
}

}  // namespace medq::chat
