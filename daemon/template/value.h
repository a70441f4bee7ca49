// The runtime value of the template language: Python's data model as far as
// chat templates use it. Lists, dicts and namespaces are shared by reference
// (as in Python); dicts keep insertion order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace medq::chat {

class Value;
class Evaluator;
struct Dict;
struct Callable;

using List = std::vector<Value>;

// Jinja2's Undefined: printing gives "", most other uses are errors whose
// message is `hint` (e.g. "'x' is undefined").
struct Undefined {
  std::string hint;
};
struct NoneType {};

// A Jinja2 namespace() object: the one mutable object a template may change
// (`{% set ns.attr = ... %}`).
struct Namespace {
  std::shared_ptr<Dict> attrs;
};

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kCallable
  };

  Value() : v_(Undefined{}) {}
  static Value Undef(std::string hint) { return Make<Undefined>(Undefined{std::move(hint)}); }
  static Value None() { return Make<NoneType>(NoneType{}); }
  static Value Bool(bool b) { return Make<bool>(b); }
  static Value Int(int64_t i) { return Make<int64_t>(i); }
  static Value Float(double d) { return Make<double>(d); }
  static Value Str(std::string s) { return Make<std::string>(std::move(s)); }
  static Value MakeList(List items = {}) {
    return Make<std::shared_ptr<List>>(std::make_shared<List>(std::move(items)));
  }
  // A Python tuple: a list that prints as `(a, b)` and never equals a list.
  static Value MakeTuple(List items) {
    Value v = MakeList(std::move(items));
    v.tuple_ = true;
    return v;
  }
  static Value MakeDict();
  static Value MakeDict(Dict d);
  static Value MakeNamespace();
  static Value MakeCallable(std::string name,
                            std::function<Value(Evaluator&, struct CallArgs&)> fn);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_undefined() const { return kind() == Kind::kUndefined; }
  bool is_none() const { return kind() == Kind::kNone; }
  bool is_bool() const { return kind() == Kind::kBool; }
  bool is_int() const { return kind() == Kind::kInt; }
  bool is_float() const { return kind() == Kind::kFloat; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::kString; }
  bool is_list() const { return kind() == Kind::kList; }
  bool is_tuple() const { return tuple_; }
  bool is_dict() const { return kind() == Kind::kDict; }
  bool is_namespace() const { return kind() == Kind::kNamespace; }
  bool is_callable() const { return kind() == Kind::kCallable; }

  // Accessors; precondition: the matching kind.
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }
  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const { return std::get<int64_t>(v_); }
  double as_float() const { return std::get<double>(v_); }
  const std::string& as_string() const { return std::get<std::string>(v_); }
  List& as_list() const { return *std::get<std::shared_ptr<List>>(v_); }
  Dict& as_dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Dict& namespace_attrs() const { return *std::get<Namespace>(v_).attrs; }
  const Callable& as_callable() const { return *std::get<std::shared_ptr<Callable>>(v_); }

  // Numeric value of an int, float or bool (Python: bool is an int).
  double ToDouble() const;

  // Python truthiness.
  bool Truthy() const;
  // Python str(), as `{{ }}` prints it (Undefined prints "").
  std::string Str() const;
  // Python repr(), used for items inside printed lists and dicts. Throws
  // TemplateError past kMaxNestingDepth (a namespace can contain itself).
  std::string Repr(int depth = 0) const;
  // The Python type name, for error messages ("str", "int", "dict"...).
  std::string TypeName() const;

 private:
  using Storage =
      std::variant<Undefined, NoneType, bool, int64_t, double, std::string, std::shared_ptr<List>,
                   std::shared_ptr<Dict>, Namespace, std::shared_ptr<Callable>>;
  explicit Value(Storage v) : v_(std::move(v)) {}
  template <typename T, typename A>
  static Value Make(A&& a) {
    return Value(Storage(std::in_place_type<T>, std::forward<A>(a)));
  }
  Storage v_;
  bool tuple_ = false;
};

// Insertion-ordered dict; lookups are linear, which suits chat messages.
struct Dict {
  std::vector<std::pair<Value, Value>> items;

  const Value* Find(const Value& key) const;
  const Value* Find(std::string_view key) const;
  void Set(Value key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Something a template can call: a global function, a bound method or a macro.
struct Callable {
  std::string name;
  std::function<Value(Evaluator&, CallArgs&)> fn;
};

// Python ==, with 1 == 1.0 == True and deep comparison of lists and dicts.
bool ValuesEqual(const Value& a, const Value& b);

// Converts JSON (as the caller gave it) to a Value, keeping key order.
// Throws TemplateError when nested deeper than kMaxJsonDepth.
Value FromJson(const nlohmann::ordered_json& j, int depth = 0);

}  // namespace medq::chat
