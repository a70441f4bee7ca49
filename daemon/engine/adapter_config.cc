#include "daemon/engine/adapter_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "daemon/engine/model_config.h"
#include "daemon/engine/status_macros.h"

namespace medq::engine {
namespace {

constexpr const char* kModules[] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                    "gate_proj", "up_proj", "down_proj"};

bool IsEmpty(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() || (it->is_object() && it->empty()) ||
         (it->is_array() && it->empty());
}

}  // namespace

Result<AdapterConfig> ParseAdapterConfig(const std::filesystem::path& path) {
  nlohmann::json j;
  MEDQ_ASSIGN_OR_RETURN(j, ReadJsonFile(path));
  if (!j.is_object()) return AdapterError(path, "is not a JSON object");
  AdapterConfig c;
  if (j.contains("peft_type") && j["peft_type"] != "LORA") {
    return AdapterError(path, "peft_type is not LORA; only LoRA adapters are supported");
  }
  if (!j.contains("r") || !j["r"].is_number_integer() || j["r"].get<int64_t>() <= 0 ||
      j["r"].get<int64_t>() > 65536) {
    return AdapterError(path, "'r' is missing or not a positive integer");
  }
  c.r = j["r"].get<int64_t>();
  if (!j.contains("lora_alpha") || !j["lora_alpha"].is_number() ||
      !std::isfinite(j["lora_alpha"].get<double>())) {
    return AdapterError(path, "'lora_alpha' is missing or not a number");
  }
  c.alpha = j["lora_alpha"].get<double>();
  if (j.contains("use_rslora") && j["use_rslora"].is_boolean())
    c.rslora = j["use_rslora"].get<bool>();
  if (j.contains("use_dora") && j["use_dora"] == true)
    return AdapterError(path, "DoRA is not supported");
  if (j.contains("fan_in_fan_out") && j["fan_in_fan_out"] == true) {
    return AdapterError(path, "fan_in_fan_out is not supported");
  }
  if (j.contains("bias") && j["bias"].is_string() && j["bias"] != "none") {
    return AdapterError(path, "trained biases (bias != \"none\") are not supported");
  }
  for (const char* key :
       {"rank_pattern", "alpha_pattern", "layers_to_transform", "modules_to_save"}) {
    if (!IsEmpty(j, key)) return AdapterError(path, std::string("'") + key + "' is not supported");
  }
  const auto targets = j.find("target_modules");
  if (targets != j.end() && targets->is_string() && *targets == "all-linear") {
    for (const char* m : kModules)
      c.targets.insert(m);
  } else if (targets != j.end() && targets->is_array()) {
    for (const auto& t : *targets) {
      if (!t.is_string()) return AdapterError(path, "'target_modules' holds a non-string");
      const std::string name = t.get<std::string>();
      bool known = false;
      for (const char* m : kModules)
        known = known || name == m;
      if (!known) {
        return AdapterError(path, "target module '" + name +
                                      "' is not one of q_proj, k_proj, v_proj, o_proj, gate_proj, "
                                      "up_proj, down_proj");
      }
      c.targets.insert(name);
    }
  } else {
    return AdapterError(path, "'target_modules' must be a list of module names or \"all-linear\"");
  }
  return c;
}

Error AdapterError(const std::filesystem::path& file, const std::string& what) {
  return Error(ErrorCode::kInvalidRequest, "adapter " + file.string() + ": " + what);
}

}  // namespace medq::engine
