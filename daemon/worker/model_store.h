// The models the worker has loaded: weights, tokenizer and chat template per
// model directory (and adapter). Worker thread only: every method touches
// LibTorch or loaded models.
#pragma once

#include <chrono>
#include <filesystem>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/messages.h"
#include "common/result.h"
#include "daemon/engine/embedding.h"
#include "daemon/engine/engine.h"
#include "daemon/grammar/structured_output.h"
#include "daemon/model_resolver.h"
#include "daemon/template/chat_template.h"
#include "daemon/tokenizer/tokenizer.h"

namespace medq::daemon {

// What a model folder holds: a decoder that generates, or an encoder that
// embeds (engine::IsEmbeddingModelDir).
enum class ModelKind { kGeneration, kEmbedding };
const char* ModelKindName(ModelKind kind);  // "generation" or "embedding"

// What a job needs of a model. Owned by the ModelStore. Exactly one of
// `model` and `embedding` is set.
struct LoadedModel {
  std::string key;                             // model dir, plus "+" adapter dir when adapted
  std::string name;                            // as first requested, for logs and `health`
  std::shared_ptr<const engine::Model> model;  // generation models
  std::shared_ptr<const engine::EmbeddingModel> embedding;  // embedding models
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;    // null without tokenizer.json
  std::optional<chat::ChatTemplate> chat_template;          // none without chat_template
  // Structured output's grammar compiler for this vocabulary: made at the
  // first constrained request (worker thread), then reused with its cache.
  mutable std::shared_ptr<grammar::StructuredOutput> structured;
  double load_ms = 0;
  bool fell_back_to_cpu = false;
  std::chrono::steady_clock::time_point last_used;

  ModelKind kind() const { return embedding ? ModelKind::kEmbedding : ModelKind::kGeneration; }
  // The loaded engine's description, whichever kind.
  LoadedModelInfo Describe() const;
};

// INVALID_REQUEST naming the op to use when the model `name`, of kind `is`,
// is not of kind `want` (an embedding model given to generate, a generation
// model given to embed).
Status RequireKind(const std::string& name, ModelKind is, ModelKind want);

struct LoadPolicy {
  std::string device = "auto";  // "auto" (CUDA when available), "cpu", "cuda:N"
  std::string dtype = "auto";   // engine::LoadOptions::dtype
  bool cpu_fallback = true;     // on CUDA OOM while loading, load on the CPU
  // Least recently used models are unloaded past this many of one kind:
  // generation and embedding models count apart, so that an embedding model
  // serving beside a generation model does not evict it.
  int max_loaded = 1;
  // engine::LoadOptions::pack_for_batches: on for max_concurrent > 1, where
  // CPU bf16 generations share decode steps.
  bool pack_for_batches = false;
  // engine::LoadOptions::quantize: "none", "int8" or "int4", for models
  // whose name has no ":none", ":int8" or ":int4" suffix (model_resolver.h:
  // SplitModelName), which Acquire reads from the name it is given. An
  // adapted model is merged into a full-precision base, then quantized.
  std::string quantize = "none";
  // engine::LoadOptions::quantize_embeddings, for every quantized model.
  bool quantize_embeddings = false;
};

class ModelStore {
 public:
  explicit ModelStore(LoadPolicy policy) : policy_(std::move(policy)) {}

  // The loaded model for `dir` (+ `adapter`, may be empty), loading it first
  // when needed (and unloading the least recently used of its kind past
  // max_loaded), with the quantization `name`'s suffix gives, else the
  // policy's (a quantization other than the policy's is a model of its
  // own). An embedding model is warmed up with one embed before it is
  // listed. Failure: the engine's, tokenizer's or template's error;
  // INVALID_REQUEST for an adapter on an embedding model.
  Result<LoadedModel*> Acquire(const std::string& name, const std::filesystem::path& dir,
                               const std::filesystem::path& adapter);

  // Unloads a model by key or name; false when none matched.
  bool Unload(const std::string& key_or_name);
  // Unloads models unused for longer than `idle`; returns their names.
  std::vector<std::string> UnloadIdle(std::chrono::steady_clock::duration idle);

  const std::list<LoadedModel>& loaded() const { return models_; }
  // How many loads Acquire has done: a caller compares it before and after
  // to tell whether its Acquire loaded (the new model is then loaded().front()).
  int loads() const { return loads_; }

 private:
  Result<LoadedModel> Load(const std::string& name, const std::filesystem::path& dir,
                           const std::filesystem::path& adapter);
  Result<LoadedModel> LoadEmbedding(const std::string& name, const std::filesystem::path& dir);
  // `for_merge`: the weights will take a LoRA adapter (see CpuDtype).
  Result<std::shared_ptr<const engine::Model>> LoadWeights(const std::filesystem::path& dir,
                                                           bool for_merge,
                                                           const std::string& quantize,
                                                           bool* fell_back);
  // gpu_fallback = cpu and the device ran out of memory (loading or merging).
  bool FallsBackToCpu(const Error& error) const;
  // The dtype a model gets on the CPU after a fallback or for a merge.
  std::string CpuDtype(bool for_merge) const;
  // LoadOptions for `device`, `dtype` and `quantize`: a base for a merge is
  // loaded unquantized (the merged model is quantized after).
  engine::LoadOptions Options(const std::string& device, const std::string& dtype, bool for_merge,
                              const std::string& quantize) const;
  Result<std::shared_ptr<const engine::Model>> LoadOnCpu(const std::filesystem::path& dir,
                                                         bool for_merge,
                                                         const std::string& quantize);
  std::string ResolveDevice() const;

  LoadPolicy policy_;
  std::list<LoadedModel> models_;  // most recently used first
  int loads_ = 0;
};

}  // namespace medq::daemon
