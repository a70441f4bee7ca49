#include "daemon/tokenizer/json_numbers.h"

#include <nlohmann/json.hpp>

namespace medq::tokenizer {

std::optional<int32_t> TokenIdOf(const nlohmann::json& v) {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > INT32_MAX) {
    return std::nullopt;
  }
  return static_cast<int32_t>(v.get<int64_t>());
}

std::optional<size_t> CountOf(const nlohmann::json& v) {
  static_assert(sizeof(size_t) == sizeof(uint64_t), "a usize is 64 bits here");
  // A document's non-negative integers are number_unsigned (up to 2^64 - 1);
  // one built in C++ from a signed type is number_integer.
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<size_t>(v.get<int64_t>());
  return std::nullopt;
}

std::optional<size_t> CountOf(const nlohmann::json& object, const char* key, size_t fallback) {
  const auto it = object.find(key);
  return it == object.end() ? std::optional<size_t>(fallback) : CountOf(*it);
}

}  // namespace medq::tokenizer
