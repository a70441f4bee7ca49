// Global functions available to every template: Jinja2's namespace, range
// and dict, plus raise_exception and strftime_now, which transformers adds.
#include <ctime>

#include "daemon/template/builtins.h"
#include "daemon/template/evaluator.h"
#include "daemon/template/scope.h"

namespace medq::chat {
namespace {

int64_t RangeArg(const Value& v) {
  if (v.is_int()) return v.as_int();
  if (v.is_bool()) return v.as_bool() ? 1 : 0;
  throw TemplateError("range(): '" + v.TypeName() + "' object cannot be interpreted as an integer");
}

Value Range(Evaluator&, CallArgs& args) {
  if (!args.keyword.empty()) throw TemplateError("range() takes no keyword arguments");
  const auto& p = args.positional;
  if (p.empty() || p.size() > 3) throw TemplateError("range() expects 1 to 3 arguments");
  int64_t start = 0;
  int64_t stop = 0;
  int64_t step = 1;
  if (p.size() == 1) {
    stop = RangeArg(p[0]);
  } else {
    start = RangeArg(p[0]);
    stop = RangeArg(p[1]);
    if (p.size() == 3) step = RangeArg(p[2]);
  }
  if (step == 0) throw TemplateError("range() arg 3 must not be zero");
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (static_cast<int64_t>(out.size()) >= kMaxRange) {
      throw TemplateError("range() too big, the limit is " + std::to_string(kMaxRange) + " items");
    }
    out.push_back(Value::Int(i));
    if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
  }
  return Value::MakeList(std::move(out));
}

Value MakeNamespace(Evaluator& ev, CallArgs& args) {
  Value ns = Value::MakeNamespace();
  ev.TrackNamespace(ns);
  Dict& attrs = ns.namespace_attrs();
  if (args.positional.size() > 1) throw TemplateError("namespace() takes at most one mapping");
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (!init.is_dict()) throw TemplateError("namespace() argument must be a dict");
    for (const auto& [k, v] : init.as_dict().items)
      attrs.Set(k, v);
  }
  for (const auto& [k, v] : args.keyword)
    attrs.Set(Value::Str(k), v);
  return ns;
}

Value MakeDictFn(Evaluator&, CallArgs& args) {
  Dict d;
  if (args.positional.size() > 1) throw TemplateError("dict() takes at most one mapping");
  if (!args.positional.empty()) {
    const Value& init = args.positional[0];
    if (!init.is_dict()) throw TemplateError("dict() argument must be a dict");
    d = init.as_dict();
  }
  for (const auto& [k, v] : args.keyword)
    d.Set(Value::Str(k), v);
  return Value::MakeDict(std::move(d));
}

Value RaiseException(Evaluator&, CallArgs& args) {
  ArgBinder a("raise_exception", args, {"message"});
  const std::string msg = a.GetOr(0, Value::Str("")).Str();
  throw TemplateError("the chat template raised an error: " + msg);
}

Value StrftimeNow(Evaluator&, CallArgs& args) {
  ArgBinder a("strftime_now", args, {"format"});
  const Value* f = a.Get(0);
  if (f == nullptr || !f->is_string()) throw TemplateError("strftime_now() needs a format string");
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char buf[512];
  const size_t n = std::strftime(buf, sizeof(buf), f->as_string().c_str(), &tm);
  return Value::Str(std::string(buf, n));
}

}  // namespace

void AddGlobalFunctions(Scope& globals) {
  globals.Set("range", Value::MakeCallable("range", Range));
  globals.Set("namespace", Value::MakeCallable("namespace", MakeNamespace));
  globals.Set("dict", Value::MakeCallable("dict", MakeDictFn));
  globals.Set("raise_exception", Value::MakeCallable("raise_exception", RaiseException));
  globals.Set("strftime_now", Value::MakeCallable("strftime_now", StrftimeNow));
}

}  // namespace medq::chat
