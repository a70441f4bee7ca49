// The engine's diagnostic switches: environment variables that are not
// configuration keys (medqd(8), ENVIRONMENT), each read once by the code
// that uses it. Their parsers live here, once, so that medqd can refuse a
// value the engine would not take (TuningEnvironmentError) rather than run
// the default without a word. Header-only, free of LibTorch and of CUDA's
// headers: the .cu launchers include it too (C++17).
#pragma once

#include <charconv>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

namespace medq::engine::tuning {

inline constexpr const char* kCudaGraphs = "MEDQ_CUDA_GRAPHS";
inline constexpr const char* kFusedKernels = "MEDQ_FUSED_KERNELS";
inline constexpr const char* kAttentionSplits = "MEDQ_ATTENTION_SPLITS";
inline constexpr const char* kGemvSplit = "MEDQ_GEMV_SPLIT";

// The largest MEDQ_ATTENTION_SPLITS (cuda::kMaxAttentionSplits, asserted
// equal where both are seen) and its "auto".
inline constexpr int kMaxAttentionSplits = 64;
inline constexpr int kAttentionSplitsAuto = 0;

// The variable's value; nullptr when it is unset or empty (an empty variable
// is ignored, as the configuration's are).
inline const char* Value(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : nullptr;
}

// A whole decimal number, or nullopt.
inline std::optional<int> WholeNumber(std::string_view s) {
  int n = 0;
  const auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (error != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return n;
}

// MEDQ_CUDA_GRAPHS, MEDQ_FUSED_KERNELS: "1" on, "0" off.
inline std::optional<bool> ParseSwitch(std::string_view s) {
  if (s == "1") return true;
  if (s == "0") return false;
  return std::nullopt;
}

// MEDQ_ATTENTION_SPLITS: "auto" (kAttentionSplitsAuto) or 1 to
// kMaxAttentionSplits.
inline std::optional<int> ParseAttentionSplits(std::string_view s) {
  if (s == "auto") return kAttentionSplitsAuto;
  const std::optional<int> n = WholeNumber(s);
  if (n && *n >= 1 && *n <= kMaxAttentionSplits) return n;
  return std::nullopt;
}

// MEDQ_GEMV_SPLIT: warps a weight row is split over, 1, 2, 4 or 8.
inline std::optional<int> ParseGemvSplit(std::string_view s) {
  const std::optional<int> n = WholeNumber(s);
  if (n && (*n == 1 || *n == 2 || *n == 4 || *n == 8)) return n;
  return std::nullopt;
}

// The switch `name`'s setting: `fallback` when it is unset (or holds a value
// medqd would have refused).
inline bool SwitchOr(const char* name, bool fallback) {
  const char* v = Value(name);
  return v == nullptr ? fallback : ParseSwitch(v).value_or(fallback);
}

// What is wrong with these variables in this process's environment, naming
// the variable and what it takes; empty when nothing is.
inline std::string TuningEnvironmentError() {
  struct Variable {
    const char* name;
    bool (*accepts)(std::string_view);
    const char* takes;
  };
  static constexpr Variable kVariables[] = {
      {kCudaGraphs, [](std::string_view s) { return ParseSwitch(s).has_value(); }, "0 or 1"},
      {kFusedKernels, [](std::string_view s) { return ParseSwitch(s).has_value(); }, "0 or 1"},
      {kAttentionSplits, [](std::string_view s) { return ParseAttentionSplits(s).has_value(); },
       "auto or a number from 1 to 64"},
      {kGemvSplit, [](std::string_view s) { return ParseGemvSplit(s).has_value(); },
       "1, 2, 4 or 8"},
  };
  static_assert(kMaxAttentionSplits == 64, "the text above names it");
  for (const Variable& var : kVariables) {
    const char* v = Value(var.name);
    if (v != nullptr && !var.accepts(v)) {
      return std::string(var.name) + "=\"" + v + "\" is not valid: it takes " + var.takes;
    }
  }
  return {};
}

}  // namespace medq::engine::tuning
