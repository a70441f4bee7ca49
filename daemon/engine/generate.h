// The generation loop behind engine::Generate (internal).
#pragma once

#include "daemon/engine/model.h"

namespace medq::engine {

// As engine::Generate, but may throw c10::Error / std::exception (the facade
// maps them). Validation failures come back as errors.
Result<GenerateResult> RunGeneration(const Model& model, const GenerateRequest& request,
                                     const std::function<bool(int32_t)>& on_token);

}  // namespace medq::engine
