// Typed requests of the ops that take params (generate's are in
// generate_params.h). Each Parse function reads an op's params as the client
// sent them: unknown fields, wrong types and out-of-range values give
// INVALID_REQUEST naming the field, never an exception. The daemon parses
// with them; the CLI builds its requests with ToParams. docs/protocol.md
// documents each field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/generate_params.h"
#include "common/protocol.h"
#include "common/result.h"

namespace medq {

// A model (name or absolute path, "" = the default) and an optional adapter.
struct ModelRef {
  std::string model;
  std::string adapter;
};

struct LoadRequest {
  ModelRef ref;
};
Result<LoadRequest> ParseLoadRequest(const Params& params);
Params ToParams(const LoadRequest& request);

struct UnloadRequest {
  std::string model;  // required: a loaded model's name or key
};
Result<UnloadRequest> ParseUnloadRequest(const Params& params);

// tokenize takes at most this much text: its reply holds every token's id
// and string (a 128k-token context is about 0.5 MiB of text).
inline constexpr size_t kMaxTokenizeBytes = size_t{1} << 20;
// detokenize takes at most this many ids.
inline constexpr size_t kMaxDetokenizeIds = size_t{1} << 18;

struct TokenizeRequest {
  ModelRef ref;
  std::string text;
  bool add_special_tokens = true;
};
Result<TokenizeRequest> ParseTokenizeRequest(const Params& params);
Params ToParams(const TokenizeRequest& request);

struct DetokenizeRequest {
  ModelRef ref;
  std::vector<int32_t> ids;
  bool skip_special_tokens = false;
};
Result<DetokenizeRequest> ParseDetokenizeRequest(const Params& params);

struct ApplyTemplateRequest {
  ModelRef ref;
  // messages, tools and template_kwargs, read as generate reads them (keys
  // in the client's order); the other fields of GenerateParams are unused.
  GenerateParams conversation;
  bool add_generation_prompt = true;
};
Result<ApplyTemplateRequest> ParseApplyTemplateRequest(const Params& params);

// embed: one text or a list. Each text is checked here (a string, neither
// empty nor only whitespace); the count against the daemon's
// embed_max_inputs, and lengths against the model, where those are known.
struct EmbedRequest {
  std::string model;  // "" = the daemon's default_embedding_model
  std::vector<std::string> input;
  bool input_is_list = false;         // `input` came as a list (kept for ToParams)
  std::optional<bool> normalize;      // absent: as the model's modules say
  bool truncate = true;               // false: a text over the model's limit is refused
  std::optional<int64_t> dimensions;  // keep the first N components (Matryoshka)
  std::string priority = "normal";    // "high", "normal" or "low"
  std::optional<double> queue_timeout_s;
  std::optional<double> timeout_s;  // the request's deadline, as generate's
};
Result<EmbedRequest> ParseEmbedRequest(const Params& params);
Params ToParams(const EmbedRequest& request);

struct CancelRequest {
  std::string job;
};
Result<CancelRequest> ParseCancelRequest(const Params& params);

struct InjectFaultRequest {
  std::string at;  // "load", "merge", "decode", "completion" or "store-write"
};
Result<InjectFaultRequest> ParseInjectFaultRequest(const Params& params);

}  // namespace medq
