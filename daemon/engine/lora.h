// PEFT LoRA adapters merged into a copy of the base model (internal).
#pragma once

#include <filesystem>
#include <memory>

#include "daemon/engine/model.h"

namespace medq::engine {

// As engine::ApplyAdapter, but may throw c10::Error (the facade maps it).
// Supports adapter_config.json with r, lora_alpha, target_modules (a list, or
// "all-linear"), use_rslora; refuses DoRA, fan_in_fan_out, trained biases,
// rank/alpha patterns and modules other than the seven projections.
Result<std::shared_ptr<const Model>> MergeAdapter(const std::shared_ptr<const Model>& base,
                                                  const std::filesystem::path& adapter_dir);

}  // namespace medq::engine
