// Typed reads of a model's config.json (decoders and encoders alike): a key
// of the wrong type or out of range is kInvalidRequest naming the file and
// the key, never an exception. Internal to the engine.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace medq::engine {

// Reads keys of `j`, which is borrowed and must outlive the reader; `source`
// (copied: a reader of a nested object names it in a temporary) names the
// file in messages.
class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& j, std::string source) : j_(j), source_(std::move(source)) {}

  const std::string& source() const { return source_; }

  Error Fail(const std::string& key, const std::string& what) const {
    return Error(ErrorCode::kInvalidRequest,
                 source_ + ": '" + key + "' " + what + "; fix the model's config");
  }
  bool Has(const std::string& key) const {
    const auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  // An integer in [lo, hi]; `fallback` when absent (nullopt: required).
  Result<int64_t> Int(const std::string& key, int64_t lo, int64_t hi,
                      std::optional<int64_t> fallback = std::nullopt) const {
    if (!Has(key)) {
      if (fallback) return *fallback;
      return Fail(key, "is missing");
    }
    const nlohmann::json& v = j_.at(key);
    if (!v.is_number_integer()) return Fail(key, "is not an integer");
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
      return Fail(key, "is " + std::to_string(x) + ", outside [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
    }
    return x;
  }
  // A finite number > 0 and <= hi.
  Result<double> Positive(const std::string& key, double hi, double fallback) const {
    if (!Has(key)) return fallback;
    const nlohmann::json& v = j_.at(key);
    if (!v.is_number()) return Fail(key, "is not a number");
    const double x = v.get<double>();
    if (!std::isfinite(x) || x <= 0 || x > hi) return Fail(key, "is not in (0, " + Num(hi) + "]");
    return x;
  }
  Result<std::string> String(const std::string& key, const std::string& fallback) const {
    if (!Has(key)) return fallback;
    if (!j_.at(key).is_string()) return Fail(key, "is not a string");
    return j_.at(key).get<std::string>();
  }
  Result<bool> Bool(const std::string& key, bool fallback) const {
    if (!Has(key)) return fallback;
    if (!j_.at(key).is_boolean()) return Fail(key, "is not true/false");
    return j_.at(key).get<bool>();
  }

 private:
  static std::string Num(double x) {
    std::ostringstream s;
    s << x;
    return s.str();
  }
  const nlohmann::json& j_;
  std::string source_;
};

}  // namespace medq::engine
