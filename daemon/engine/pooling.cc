#include "daemon/engine/pooling.h"

#include <nlohmann/json.hpp>

namespace medq::engine {
namespace {

using nlohmann::json;

struct ModeName {
  PoolingMode mode;
  const char* name;        // current "pooling_mode" value
  const char* legacy_key;  // legacy boolean key
};

// sentence-transformers' order, which is also the concatenation order of the
// legacy booleans.
constexpr ModeName kModes[] = {
    {PoolingMode::kCls, "cls", "pooling_mode_cls_token"},
    {PoolingMode::kMax, "max", "pooling_mode_max_tokens"},
    {PoolingMode::kMean, "mean", "pooling_mode_mean_tokens"},
    {PoolingMode::kMeanSqrtLen, "mean_sqrt_len_tokens", "pooling_mode_mean_sqrt_len_tokens"},
    {PoolingMode::kWeightedMean, "weightedmean", "pooling_mode_weightedmean_tokens"},
    {PoolingMode::kLastToken, "lasttoken", "pooling_mode_lasttoken"},
};

Error Bad(const std::string& source, const std::string& key, const std::string& what) {
  return Error(ErrorCode::kInvalidRequest,
               source + ": '" + key + "' " + what + "; fix the model's Pooling config");
}

Result<PoolingMode> ModeFromName(const json& v, const std::string& source) {
  if (v.is_string()) {
    for (const auto& m : kModes) {
      if (v.get<std::string>() == m.name) return m.mode;
    }
  }
  return Bad(source, "pooling_mode",
             "names " + v.dump() +
                 ", not one of cls, max, mean, mean_sqrt_len_tokens, weightedmean, lasttoken");
}

}  // namespace

Result<PoolingConfig> ParsePoolingConfig(const json& j, const std::string& source) {
  if (!j.is_object()) {
    return Error(ErrorCode::kInvalidRequest, source + " is not a JSON object");
  }
  PoolingConfig c;
  c.modes.clear();
  const auto mode = j.find("pooling_mode");
  if (mode != j.end() && !mode->is_null()) {
    if (mode->is_array()) {
      for (const json& v : *mode) {
        auto m = ModeFromName(v, source);
        if (!m.ok()) return m.error();
        c.modes.push_back(*m);
      }
    } else {
      auto m = ModeFromName(*mode, source);
      if (!m.ok()) return m.error();
      c.modes.push_back(*m);
    }
  } else {
    for (const auto& m : kModes) {
      const auto it = j.find(m.legacy_key);
      if (it == j.end() || it->is_null()) continue;
      if (!it->is_boolean()) return Bad(source, m.legacy_key, "is not true/false");
      if (it->get<bool>()) c.modes.push_back(m.mode);
    }
  }
  if (c.modes.empty()) c.modes.push_back(PoolingMode::kMean);
  const auto prompt = j.find("include_prompt");
  if (prompt != j.end() && !prompt->is_null()) {
    if (!prompt->is_boolean()) return Bad(source, "include_prompt", "is not true/false");
    c.include_prompt = prompt->get<bool>();
  }
  for (const char* key : {"embedding_dimension", "word_embedding_dimension"}) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_number_integer() || it->get<int64_t>() <= 0) {
      return Bad(source, key, "is not a positive integer");
    }
    c.embedding_dimension = it->get<int64_t>();
    break;
  }
  return c;
}

std::string PoolingName(const PoolingConfig& config) {
  std::string out;
  for (const PoolingMode mode : config.modes) {
    for (const auto& m : kModes) {
      if (m.mode != mode) continue;
      if (!out.empty()) out.push_back('+');
      out.append(m.name);
    }
  }
  return out;
}

at::Tensor Pool(const PoolingConfig& config, const at::Tensor& hidden_in, const at::Tensor& mask) {
  const at::Tensor hidden = hidden_in.to(at::kFloat);
  const at::Tensor m = mask.to(at::kFloat).unsqueeze(-1);  // [B, T, 1]
  const at::Tensor lengths = mask.to(at::kLong).sum(1);    // [B], each >= 1
  std::vector<at::Tensor> parts;
  for (const PoolingMode mode : config.modes) {
    switch (mode) {
      case PoolingMode::kCls:
        parts.push_back(hidden.select(1, 0));
        break;
      case PoolingMode::kMax:
        parts.push_back(
            hidden.masked_fill(m == 0, -std::numeric_limits<float>::infinity()).amax(1));
        break;
      case PoolingMode::kMean:
        parts.push_back((hidden * m).sum(1) / m.sum(1).clamp_min(1e-9));
        break;
      case PoolingMode::kMeanSqrtLen:
        parts.push_back((hidden * m).sum(1) / m.sum(1).clamp_min(1e-9).sqrt());
        break;
      case PoolingMode::kWeightedMean: {
        // Weights 1, 2, ... by position (real tokens come first).
        const at::Tensor w =
            at::arange(1, hidden.size(1) + 1, hidden.options()).view({1, -1, 1}) * m;
        parts.push_back((hidden * w).sum(1) / w.sum(1).clamp_min(1e-9));
        break;
      }
      case PoolingMode::kLastToken: {
        const at::Tensor last = (lengths - 1).view({-1, 1, 1}).expand({-1, 1, hidden.size(2)});
        parts.push_back(hidden.gather(1, last).squeeze(1));
        break;
      }
    }
  }
  return parts.size() == 1 ? parts[0] : at::cat(parts, -1);
}

}  // namespace medq::engine
