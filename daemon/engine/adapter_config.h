// A PEFT LoRA adapter's adapter_config.json, parsed and checked. Free of
// LibTorch (lora.cc merges the weights it describes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>

#include "common/result.h"

namespace medq::engine {

struct AdapterConfig {
  int64_t r = 0;                  // in [1, 65536]
  double alpha = 0;               // lora_alpha, finite
  bool rslora = false;            // scale alpha / sqrt(r) instead of alpha / r
  std::set<std::string> targets;  // among the seven projections' names
};

// Reads and checks `path` (an adapter_config.json): r, lora_alpha,
// target_modules (a list, or "all-linear"), use_rslora. Refuses DoRA,
// fan_in_fan_out, trained biases, rank/alpha patterns, layers_to_transform,
// modules_to_save and modules other than the seven projections. Failure:
// kInvalidRequest naming the file (unreadable, not JSON, a refused or wrong
// key). Never throws.
Result<AdapterConfig> ParseAdapterConfig(const std::filesystem::path& path);

// The INVALID_REQUEST error for an adapter file that cannot be used: "adapter
// FILE: WHAT". Shared with the adapter's weights (lora.cc).
Error AdapterError(const std::filesystem::path& file, const std::string& what);

}  // namespace medq::engine
