// Shared helpers of the built-in library: argument binding, iteration, len().
#include "daemon/template/builtins.h"

#include "daemon/template/evaluator.h"
#include "daemon/template/text_util.h"

namespace medq::chat {

ArgBinder::ArgBinder(std::string_view function, const CallArgs& args,
                     std::initializer_list<std::string_view> names)
    : bound_(names.size(), nullptr) {
  if (args.positional.size() > names.size()) {
    throw TemplateError(std::string(function) + "() takes at most " + std::to_string(names.size()) +
                        " argument(s), " + std::to_string(args.positional.size()) + " given");
  }
  for (size_t i = 0; i < args.positional.size(); ++i)
    bound_[i] = &args.positional[i];
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    for (std::string_view n : names) {
      if (n == key) break;
      ++i;
    }
    if (i == names.size()) {
      throw TemplateError(std::string(function) + "() got an unexpected keyword argument '" + key +
                          "'");
    }
    if (bound_[i] != nullptr) {
      throw TemplateError(std::string(function) + "() got multiple values for argument '" + key +
                          "'");
    }
    bound_[i] = &value;
  }
}

List Iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return {};
    case Value::Kind::kList:
      return v.as_list();
    case Value::Kind::kDict: {
      List keys;
      for (const auto& [k, val] : v.as_dict().items)
        keys.push_back(k);
      return keys;
    }
    case Value::Kind::kString: {
      List chars;
      for (char32_t cp : DecodeUtf8(v.as_string())) {
        std::string s;
        AppendUtf8(cp, s);
        chars.push_back(Value::Str(std::move(s)));
      }
      return chars;
    }
    default:
      throw TemplateError("'" + v.TypeName() + "' object is not iterable");
  }
}

int64_t Length(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kUndefined:
      return 0;
    case Value::Kind::kString:
      return static_cast<int64_t>(CodePointCount(v.as_string()));
    case Value::Kind::kList:
      return static_cast<int64_t>(v.as_list().size());
    case Value::Kind::kDict:
      return static_cast<int64_t>(v.as_dict().items.size());
    default:
      throw TemplateError("object of type '" + v.TypeName() + "' has no len()");
  }
}

}  // namespace medq::chat
