#include "daemon/engine/model_config.h"

#include <cmath>
#include <limits>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/file_read.h"
#include "daemon/engine/config_reader.h"
#include "daemon/engine/status_macros.h"

namespace medq::engine {
namespace {

constexpr const char* kArchitectures[] = {"LlamaForCausalLM", "MistralForCausalLM",
                                          "Qwen2ForCausalLM", "Qwen3ForCausalLM"};

using nlohmann::json;

constexpr const char* kRopeParameters = "rope_parameters";

// eos_token_id / bos_token_id: an int, a list of ints, or null.
Result<std::vector<int32_t>> TokenIds(const json& j, const std::string& key,
                                      const std::string& source) {
  std::vector<int32_t> ids;
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ids;
  const auto add = [&](const json& v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
      return false;
    }
    ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
    return true;
  };
  bool ok = true;
  if (it->is_array()) {
    for (const auto& v : *it)
      ok = ok && add(v);
  } else {
    ok = add(*it);
  }
  if (!ok) {
    return Error(ErrorCode::kInvalidRequest,
                 source + ": '" + key + "' must be a token id or a list of token ids");
  }
  return ids;
}

// The scaling of RoPE from `field` (rope_scaling, or transformers 5's
// rope_parameters): absent, null or rope_type "default" is none; an object
// that names no type has `untyped` (transformers 5 reads rope_parameters
// so as "default"; an untyped rope_scaling is refused).
Result<RopeScaling> ParseRopeScaling(const json& config, const std::string& field,
                                     const std::string& untyped, const ConfigReader& r) {
  RopeScaling rs;
  const auto it = config.find(field);
  if (it == config.end() || it->is_null()) return rs;
  if (!it->is_object()) return r.Fail(field, "is not an object");
  std::string type = untyped;
  if (it->contains("rope_type") && (*it)["rope_type"].is_string()) {
    type = (*it)["rope_type"].get<std::string>();
  } else if (it->contains("type") && (*it)["type"].is_string()) {
    type = (*it)["type"].get<std::string>();
  }
  const ConfigReader sub(*it, r.source() + ": " + field);
  if (type == "default") return rs;
  if (type == "linear") {
    rs.type = RopeScalingType::kLinear;
  } else if (type == "llama3") {
    rs.type = RopeScalingType::kLlama3;
    MEDQ_ASSIGN_OR_RETURN(rs.low_freq_factor, sub.Positive("low_freq_factor", 1e6, 1.0));
    MEDQ_ASSIGN_OR_RETURN(rs.high_freq_factor, sub.Positive("high_freq_factor", 1e6, 4.0));
    MEDQ_ASSIGN_OR_RETURN(rs.original_max_position_embeddings,
                          sub.Int("original_max_position_embeddings", 1, int64_t{1} << 30, 8192));
    if (rs.high_freq_factor <= rs.low_freq_factor) {
      return r.Fail(field, "has high_freq_factor <= low_freq_factor");
    }
  } else {
    return r.Fail(field,
                  "has type '" + type + "', which is not supported (supported: linear, llama3)");
  }
  if (!sub.Has("factor")) return r.Fail(field, "has no 'factor'");
  MEDQ_ASSIGN_OR_RETURN(rs.factor, sub.Positive("factor", 1e6, 1.0));
  return rs;
}

// RoPE's base and scaling. transformers 5 writes both into one object,
// rope_parameters ({"rope_theta": ..., "rope_type": ..., and the scaling's
// keys}); earlier versions wrote rope_theta and rope_scaling at the top
// level. A config with rope_parameters is read from it alone, as transformers
// 5 does (it turns the older keys into that object on load); one without,
// from the older keys.
Status ParseRope(const json& config, const ConfigReader& r, ModelConfig& c) {
  const auto params = config.find(kRopeParameters);
  if (params == config.end() || params->is_null()) {
    MEDQ_ASSIGN_OR_RETURN(c.rope_theta, r.Positive("rope_theta", 1e12, 10000.0));
    MEDQ_ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(config, "rope_scaling", "", r));
    return Status::Ok();
  }
  if (!params->is_object()) return r.Fail(kRopeParameters, "is not an object");
  // Models with several attention types (Gemma 3) write one object per
  // type; none of the supported architectures does, and reading one of them
  // as the whole would be a guess.
  for (const auto& [key, value] : params->items()) {
    if (value.is_object()) {
      return r.Fail(kRopeParameters,
                    "holds one object per attention type ('" + key + "'), which is not supported");
    }
  }
  const ConfigReader sub(*params, r.source() + ": " + kRopeParameters);
  MEDQ_ASSIGN_OR_RETURN(c.rope_theta, sub.Positive("rope_theta", 1e12, 10000.0));
  MEDQ_ASSIGN_OR_RETURN(c.rope_scaling, ParseRopeScaling(config, kRopeParameters, "default", r));
  return Status::Ok();
}

}  // namespace

std::string SupportedArchitectures() {
  std::string out;
  for (const char* a : kArchitectures)
    out += (out.empty() ? "" : ", ") + std::string(a);
  return out;
}

Result<ModelConfig> ParseModelConfig(const json& config, const json* generation_config,
                                     const std::string& source) {
  if (!config.is_object()) {
    return Error(ErrorCode::kInvalidRequest, source + " is not a JSON object");
  }
  const ConfigReader r(config, source);
  ModelConfig c;
  const auto arch = config.find("architectures");
  if (arch == config.end() || !arch->is_array() || arch->empty() || !(*arch)[0].is_string()) {
    return r.Fail("architectures", "is missing or not a list of names (supported: " +
                                       SupportedArchitectures() + ")");
  }
  c.architecture = (*arch)[0].get<std::string>();
  bool known = false;
  for (const char* a : kArchitectures)
    known = known || c.architecture == a;
  if (!known) {
    return Error(ErrorCode::kInvalidRequest,
                 source + ": architecture '" + c.architecture +
                     "' is not supported; supported: " + SupportedArchitectures());
  }
  const bool qwen2 = c.architecture == "Qwen2ForCausalLM";
  const bool qwen3 = c.architecture == "Qwen3ForCausalLM";
  const bool mistral = c.architecture == "MistralForCausalLM";

  MEDQ_ASSIGN_OR_RETURN(c.vocab_size, r.Int("vocab_size", 1, int64_t{1} << 24));
  MEDQ_ASSIGN_OR_RETURN(c.hidden_size, r.Int("hidden_size", 1, int64_t{1} << 17));
  MEDQ_ASSIGN_OR_RETURN(c.intermediate_size, r.Int("intermediate_size", 1, int64_t{1} << 19));
  MEDQ_ASSIGN_OR_RETURN(c.num_layers, r.Int("num_hidden_layers", 1, 1024));
  MEDQ_ASSIGN_OR_RETURN(c.num_heads, r.Int("num_attention_heads", 1, 4096));
  MEDQ_ASSIGN_OR_RETURN(c.num_kv_heads, r.Int("num_key_value_heads", 1, 4096, c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0) {
    return r.Fail("num_key_value_heads", "(" + std::to_string(c.num_kv_heads) +
                                             ") does not divide num_attention_heads (" +
                                             std::to_string(c.num_heads) + ")");
  }
  if (r.Has("head_dim")) {
    MEDQ_ASSIGN_OR_RETURN(c.head_dim, r.Int("head_dim", 2, 4096));
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return r.Fail("hidden_size", "(" + std::to_string(c.hidden_size) +
                                       ") is not divisible by num_attention_heads (" +
                                       std::to_string(c.num_heads) + ")");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) return r.Fail("head_dim", "must be even for rotary embeddings");
  MEDQ_ASSIGN_OR_RETURN(c.max_position_embeddings,
                        r.Int("max_position_embeddings", 1, int64_t{1} << 24, 2048));
  MEDQ_ASSIGN_OR_RETURN(c.rms_norm_eps, r.Positive("rms_norm_eps", 1.0, 1e-6));
  MEDQ_RETURN_IF_ERROR(ParseRope(config, r, c));
  MEDQ_ASSIGN_OR_RETURN(c.tie_word_embeddings, r.Bool("tie_word_embeddings", false));
  if (r.Has("hidden_act")) {
    const auto& act = config.at("hidden_act");
    if (!act.is_string() ||
        (act.get<std::string>() != "silu" && act.get<std::string>() != "swish")) {
      return r.Fail("hidden_act", "is not 'silu', the only activation supported");
    }
  }
  bool attention_bias = false;
  MEDQ_ASSIGN_OR_RETURN(attention_bias, r.Bool("attention_bias", false));
  c.qkv_bias = qwen2 || attention_bias;
  c.o_bias = !qwen2 && attention_bias;
  if (!qwen2 && !qwen3 && !mistral) MEDQ_ASSIGN_OR_RETURN(c.mlp_bias, r.Bool("mlp_bias", false));
  c.qk_norm = qwen3;
  if (mistral && r.Has("sliding_window")) {
    MEDQ_ASSIGN_OR_RETURN(c.sliding_window, r.Int("sliding_window", 1, int64_t{1} << 30));
  }
  if (qwen2 || qwen3) {
    bool sliding = false;
    MEDQ_ASSIGN_OR_RETURN(sliding, r.Bool("use_sliding_window", false));
    if (sliding) return r.Fail("use_sliding_window", "is true, which is not supported");
  }
  // The stored dtype: torch_dtype, or dtype as transformers 5 names it.
  for (const char* key : {"torch_dtype", "dtype"}) {
    if (r.Has(key) && config.at(key).is_string()) {
      c.torch_dtype = config.at(key).get<std::string>();
      break;
    }
  }

  MEDQ_ASSIGN_OR_RETURN(c.prequantized, ParsePrequantizedConfig(config, source));

  MEDQ_ASSIGN_OR_RETURN(c.eos_ids, TokenIds(config, "eos_token_id", source));
  if (generation_config != nullptr && generation_config->is_object() &&
      generation_config->contains("eos_token_id") &&
      !(*generation_config)["eos_token_id"].is_null()) {
    MEDQ_ASSIGN_OR_RETURN(c.eos_ids,
                          TokenIds(*generation_config, "eos_token_id", "generation_config.json"));
  }
  std::vector<int32_t> bos;
  MEDQ_ASSIGN_OR_RETURN(bos, TokenIds(config, "bos_token_id", source));
  if (bos.size() == 1) c.bos_id = bos[0];
  return c;
}

Result<json> ReadJsonFile(const std::filesystem::path& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) return std::move(text).error();
  json j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) {
    return Error(ErrorCode::kInvalidRequest, path.string() + " is not well-formed JSON");
  }
  return j;
}

Result<ModelConfig> LoadModelConfig(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Error(ErrorCode::kModelNotFound, "model directory " + dir.string() + " does not exist");
  }
  const auto config_path = dir / "config.json";
  if (!std::filesystem::exists(config_path, ec)) {
    return Error(ErrorCode::kInvalidRequest,
                 "model directory " + dir.string() + " has no config.json");
  }
  auto config = ReadJsonFile(config_path);
  if (!config.ok()) return config.error();
  std::optional<json> gen;
  const auto gen_path = dir / "generation_config.json";
  if (std::filesystem::exists(gen_path, ec)) {
    auto g = ReadJsonFile(gen_path);
    if (!g.ok()) return g.error();
    gen = std::move(g).value();
  }
  return ParseModelConfig(*config, gen ? &*gen : nullptr, config_path.string());
}

}  // namespace medq::engine
