// The engine's embedding API: load sentence-transformers folders (BertModel,
// MPNetModel encoders with their pooling and normalization) and embed batches
// of token ids with LibTorch on CPU or CUDA, matching sentence-transformers'
// encode().
//
// Free of LibTorch types, like engine.h. Threading: every function here must
// be called on the one worker thread that owns LibTorch (InitWorkerThread
// once first). No exception escapes: failures come back as medq::Result with
// an ErrorCode.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/engine/engine.h"

namespace medq::engine {

struct EmbeddingInfo {
  std::string architecture;  // "BertModel" or "MPNetModel"
  std::string device;        // "cpu" or "cuda:N"
  std::string dtype;         // weight dtype in memory: "fp32", "bf16" or "fp16"
  int64_t dims = 0;          // length of every vector Embed returns
  int64_t vocab_size = 0;    // every id given to Embed is in [0, vocab_size)
  // The longest sequence Embed accepts (sentence_bert_config.json's
  // max_seq_length, at most what the position embeddings allow); the caller
  // truncates to it, special tokens included.
  int64_t max_seq_length = 0;
  // The pooling modes, joined with '+' in sentence-transformers' order of
  // concatenation: "cls", "max", "mean", "mean_sqrt_len", "lasttoken"; e.g.
  // "mean" or "cls+mean".
  std::string pooling;
  bool normalize = false;  // vectors come back with unit L2 norm (a Normalize module)
  // sentence_bert_config.json's do_lower_case: the caller lowercases the text
  // before tokenizing it, as sentence-transformers does.
  bool do_lower_case = false;
  // 1_Pooling/config.json's include_prompt. Embed pools over every id it is
  // given (sentence-transformers' encode() without a prompt); a caller that
  // prepends a prompt to a model with include_prompt false must not.
  bool include_prompt = true;
  int64_t parameter_bytes = 0;  // bytes of weights held
  // The Transformer module's folder, which holds tokenizer.json: the model
  // folder itself, or a subfolder such as "0_Transformer" in older
  // sentence-transformers layouts.
  std::filesystem::path tokenizer_dir;
};

// A loaded embedding model: opaque, immutable after load.
class EmbeddingModel;

// Loads the sentence-transformers folder `dir`: config.json and
// model.safetensors (the encoder; tensor names with or without the "bert." /
// "mpnet." prefix), modules.json (Transformer, Pooling, optional Normalize),
// sentence_bert_config.json, the Pooling module's config.json. A plain
// transformers BertModel / MPNetModel folder without modules.json gets mean
// pooling and no normalization, as sentence-transformers gives it.
// `options` as for LoadModel (device, dtype).
// Failure: kModelNotFound (no such directory), kInvalidRequest (an
// architecture other than BertModel / MPNetModel, only pytorch_model.bin,
// a missing or bad config file, missing/unexpected tensors; the message names
// the file, tensor or key), kNotReady (CUDA requested but not available),
// kGpuOom, kInternal.
Result<std::shared_ptr<const EmbeddingModel>> LoadEmbeddingModel(const std::filesystem::path& dir,
                                                                 const LoadOptions& options);

// Whether `dir` holds an embedding model rather than a generation model: a
// sentence-transformers folder (modules.json), or a config.json whose
// architectures or model_type name an encoder (BertModel / MPNetModel, bert /
// mpnet, and the other BERT-family encoders, so that LoadEmbeddingModel can
// refuse them by name). Reads only those two files; false when neither says
// so (the generation loader then reports what is wrong).
bool IsEmbeddingModelDir(const std::filesystem::path& dir);

// What LoadEmbeddingModel found. The reference lives as long as `model`.
const EmbeddingInfo& Info(const EmbeddingModel& model);

// Embeds a batch of token-id sequences (tokenized with the model's tokenizer,
// special tokens included, already truncated to max_seq_length) in one padded
// forward pass with an attention mask. Returns one float32 vector of
// Info().dims per sequence, in order: pooled, and of unit norm when the model
// normalizes. A sequence's vector does not depend on the others in the batch
// (up to float rounding). An empty batch gives an empty result.
// Failure: kInvalidRequest (an empty sequence, one longer than
// max_seq_length, an id outside [0, vocab_size)), kGpuOom,
// kInsufficientMemory, kInternal.
Result<std::vector<std::vector<float>>> Embed(const EmbeddingModel& model,
                                              const std::vector<std::vector<int32_t>>& ids);
// As above, with the model's Normalize module applied when `normalize` and
// left out otherwise, whatever the folder says (pooled vectors as they are).
Result<std::vector<std::vector<float>>> Embed(const EmbeddingModel& model,
                                              const std::vector<std::vector<int32_t>>& ids,
                                              bool normalize);

}  // namespace medq::engine
