// The checks a generation request must pass before anything is allocated
// (internal), shared by Generate() and Batch::Add().
#pragma once

#include "common/result.h"
#include "daemon/engine/engine.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// kInvalidRequest naming what is wrong: an empty prompt, a prompt id outside
// the vocabulary, max_new_tokens < 0, prompt + max_new_tokens beyond the
// model's context, or sampling values out of range (ValidateSampling).
// Never throws.
Status ValidateRequest(const Model& model, const GenerateRequest& request);

}  // namespace medq::engine
