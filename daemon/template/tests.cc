// Jinja2's tests (`x is defined`, `x is string`...), with Python's notion of
// types: bool counts as a number, a dict is a sequence and iterable.
#include "daemon/template/builtins.h"
#include "daemon/template/evaluator.h"

namespace medq::chat {
namespace {

const Value& Arg(const CallArgs& args, const std::string& test) {
  ArgBinder a(test, args, {"other"});
  if (a.Get(0) == nullptr) throw TemplateError("test '" + test + "' needs an argument");
  return *a.Get(0);
}

int64_t IntOf(const Value& v, const std::string& test) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  throw TemplateError("test '" + test + "' needs an integer, not " + v.TypeName());
}

}  // namespace

bool ApplyTest(Evaluator& ev, const std::string& name, const Value& v, const CallArgs& args) {
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "string") return v.is_string();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "mapping") return v.is_dict();
  if (name == "iterable") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "sequence") return v.is_list() || v.is_dict() || v.is_string() || v.is_undefined();
  if (name == "callable") return v.is_callable();
  if (name == "lower" || name == "upper") {
    CallArgs none;
    const Value method = GetMethod(Value::Str(v.Str()), name == "lower" ? "islower" : "isupper");
    return ev.Call(method, none).Truthy();
  }
  if (name == "odd" || name == "even") {
    // Jinja2: value % 2 == 1 (odd) or == 0 (even), with Python's modulo, so
    // floats work too.
    if (!v.is_number()) IntOf(v, name);
    const Value m = BinaryOp("%", v, Value::Int(2));
    return ValuesEqual(m, Value::Int(name == "odd" ? 1 : 0));
  }
  if (name == "divisibleby") {
    const int64_t d = IntOf(Arg(args, name), name);
    if (d == 0) throw TemplateError("integer division or modulo by zero");
    return IntOf(v, name) % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return ValuesEqual(v, Arg(args, name));
  if (name == "ne" || name == "!=") return !ValuesEqual(v, Arg(args, name));
  if (name == "sameas") {
    // Python `is`: identity for containers, value and type for the singletons.
    const Value& o = Arg(args, name);
    if (v.kind() != o.kind()) return false;
    if (v.is_list()) return &v.as_list() == &o.as_list();
    if (v.is_dict()) return &v.as_dict() == &o.as_dict();
    return ValuesEqual(v, o);
  }
  static const char* kCompare[][2] = {
      {"lt", "<"}, {"lessthan", "<"},    {"<", "<"}, {"le", "<="}, {"<=", "<="},
      {"gt", ">"}, {"greaterthan", ">"}, {">", ">"}, {"ge", ">="}, {">=", ">="}};
  for (const auto& [test, op] : kCompare) {
    if (name == test) return BinaryOp(op, v, Arg(args, name)).Truthy();
  }
  if (name == "in") return BinaryOp("in", v, Arg(args, name)).Truthy();
  if (name == "filter") return v.is_string() && HasFilter(v.as_string());
  if (name == "test") {
    static const char* kTests[] = {
        "defined", "undefined", "none",   "boolean", "true",        "false",    "string",
        "number",  "integer",   "float",  "mapping", "iterable",    "sequence", "callable",
        "lower",   "upper",     "odd",    "even",    "divisibleby", "eq",       "equalto",
        "ne",      "sameas",    "lt",     "le",      "gt",          "ge",       "in",
        "filter",  "test",      "escaped"};
    if (!v.is_string()) return false;
    for (const char* t : kTests) {
      if (v.as_string() == t) return true;
    }
    return false;
  }
  if (name == "escaped") return false;
  throw TemplateError("no test named '" + name + "'");
}

}  // namespace medq::chat
