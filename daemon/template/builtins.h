// The built-in library of the template language: filters, tests, methods of
// str/dict/list values, and the global functions transformers provides.
// Every function here throws TemplateError on misuse (wrong argument count or
// type), which the evaluator reports with the position of the call.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/template/value.h"

namespace medq::chat {

class Scope;

// Binds call arguments to parameter names, Python style (positional first,
// then keywords). Throws on unknown keywords, duplicates or too many
// positional arguments.
class ArgBinder {
 public:
  ArgBinder(std::string_view function, const CallArgs& args,
            std::initializer_list<std::string_view> names);
  // The argument for parameter `i`, or nullptr when not given.
  const Value* Get(size_t i) const { return bound_[i]; }
  // The argument for parameter `i`, or `fallback`.
  Value GetOr(size_t i, Value fallback) const {
    return bound_[i] != nullptr ? *bound_[i] : std::move(fallback);
  }

 private:
  std::vector<const Value*> bound_;
};

// Applies filter `name` to `input`. Throws TemplateError for an unknown filter.
Value ApplyFilter(Evaluator& ev, const std::string& name, const Value& input, const CallArgs& args);
bool HasFilter(const std::string& name);

// Runs test `name` (`x is name(args)`). Throws TemplateError for an unknown test.
bool ApplyTest(Evaluator& ev, const std::string& name, const Value& input, const CallArgs& args);

// The method `name` of a str, dict or list value bound to it, or nullopt-like
// Undefined when that type has no such (safe) method.
Value GetMethod(const Value& self, const std::string& name);

// Python iteration: list items, dict keys, string characters; Undefined gives
// nothing. Throws TypeError-like TemplateError for other types.
List Iterate(const Value& v);

// Python len(); throws for values without a length.
int64_t Length(const Value& v);

// Python's `fmt % args`: a tuple spreads into the conversions, a dict feeds
// %(name)s, anything else is the single argument.
std::string PercentFormat(const std::string& fmt, const Value& args);

// Adds namespace, range, dict, raise_exception and strftime_now to `globals`.
void AddGlobalFunctions(Scope& globals);

}  // namespace medq::chat
