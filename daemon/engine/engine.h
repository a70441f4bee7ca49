// The inference engine's public API: load Hugging Face causal LM directories
// (Llama, Mistral, Qwen2, Qwen3; safetensors; PEFT LoRA) and generate tokens
// with LibTorch on CPU or CUDA, matching transformers.
//
// Free of LibTorch types: the daemon includes this header without LibTorch.
// Threading: every function here must be called on the one worker thread that
// owns LibTorch (InitWorkerThread once first). No exception escapes: failures
// come back as medq::Result / medq::Status with an ErrorCode.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace medq::engine {

struct LoadOptions {
  // "cpu", "cuda" or "cuda:N".
  std::string device = "cpu";
  // "auto" (the checkpoint's dtype on CUDA, fp32 on CPU), "bf16", "fp16", "fp32".
  // On CPU activations are always float32; "bf16" keeps the weights bf16 in
  // memory; "fp16" is refused on CPU.
  std::string dtype = "auto";
  // CPU with bf16 weights: also hold the projection matrices and lm_head
  // packed in tiles for batched decode steps, where four sequences then cost
  // about what one does instead of 1.3 to 1.5 times as much. The price is a
  // second copy of those matrices (counted in ModelInfo::parameter_bytes),
  // so the daemon asks for it only where generations run side by side
  // (max_concurrent > 1). Ignored elsewhere. Results are as close to
  // transformers either way, not bitwise the same: a packed model sums each
  // dot product in another order.
  bool pack_for_batches = false;
  // Weight-only quantization of the projection matrices (quantize.h): "none",
  // "int8" (symmetric, one float32 scale per output row) or "int4"
  // (asymmetric, groups of `quantize_group` weights along the input with a
  // bf16 scale and minimum each); the embeddings and lm_head (unless
  // `quantize_embeddings`), norms and biases keep `dtype`. On a CUDA device
  // the model is built and quantized in host memory, then moved in the form
  // the GPU's kernels read (device_quantized.h); int4 there needs compute
  // capability 8.0 and LibTorch 2.6 or later. Where the device cannot hold it, or the group does
  // not divide a projection's input width, the load fails with INVALID_REQUEST naming the model
  // (nothing is left loaded). A quantized model is not packed for batches (its batched decode step
  // reads the quantized rows).
  std::string quantize = "none";
  // int4's group size: 32, 64 (the default) or 128 weights.
  int64_t quantize_group = 64;
  // With quantize int8 or int4: the vocabulary matrices too, lm_head and the
  // input embeddings (one matrix when tied), in the same format
  // (quantized_embeddings.h); ignored with quantize "none".
  bool quantize_embeddings = false;
};

struct ModelInfo {
  std::string architecture;  // e.g. "LlamaForCausalLM"
  std::string device;        // "cpu" or "cuda:N"
  std::string dtype;         // weight dtype in memory: "fp32", "bf16" or "fp16"
  // The projections' quantization (LoadOptions::quantize): "none", "int8" or
  // "int4"; when quantized, dtype is that of the embeddings and lm_head
  // unless they are quantized too (quantized_embeddings, in the same format).
  std::string quantization = "none";
  bool quantized_embeddings = false;
  int64_t vocab_size = 0;
  int64_t max_context = 0;      // max_position_embeddings: prompt + new tokens must fit
  int64_t parameter_bytes = 0;  // bytes of weights held (shared tensors counted once)
  std::vector<int32_t> eos_ids;
  std::optional<int32_t> bos_id;
  // The shape numbers a caller needs to estimate a run's memory (KV cache and
  // activations) before starting it; see daemon/memory_budget.h.
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t compute_element_bytes = 4;  // per element of activations and the KV cache
  // A prefill's attention runs in fused kernels that never build the T x T
  // scores (LibTorch 2.5 and later); otherwise they are materialised.
  bool fused_causal_attention = false;
  // Otherwise the most query rows scored at once (AttentionQueryBlock(): a
  // block of LibTorch 1.13's eager attention); 0: a whole chunk's.
  int64_t attention_query_block = 0;
};

// A loaded model: opaque, immutable after load. Safe to share between runs on
// the worker thread; adapted models share the base's untouched weights.
class Model;

// Loads the model directory `dir` (config.json, model.safetensors or shards
// with model.safetensors.index.json, optional generation_config.json).
// Failure: kModelNotFound (no such directory), kInvalidRequest (bad config,
// unsupported architecture, corrupt/missing/unexpected tensors, bad options;
// the message names the file, tensor or key), kNotReady (CUDA requested but not
// available), kGpuOom, kInternal (LibTorch failure; names the model path).
Result<std::shared_ptr<const Model>> LoadModel(const std::filesystem::path& dir,
                                               const LoadOptions& options);

// Returns a new model: `base` with the PEFT LoRA adapter in `adapter_dir`
// (adapter_config.json, adapter_model.safetensors) merged as W + scale·B·A into
// copies of the targeted weights; every other tensor is shared with `base`,
// which stays usable unchanged. `quantize` (LoadOptions::quantize, int4 in
// groups of `quantize_group`, the vocabulary matrices too with
// `quantize_embeddings`) is applied to the merged model, after the
// merge in full precision; `base` must not be quantized itself. `device`
// (LoadOptions::device; empty: the base's) may name a GPU for a quantized
// adapted model whose base is on the CPU: it is merged and quantized in host
// memory and only its quantized form goes to the GPU, with the dtypes a load
// there with `dtype` gives (the way a model too big for the GPU in full
// precision gets its adapter there). Failure: kModelNotFound (no such
// directory), kInvalidRequest (adapter does not fit the base, unsupported options, a quantized
// base, a quantization the target device cannot hold, a move other than a
// quantized model's from the CPU to a GPU), kGpuOom, kInternal.
Result<std::shared_ptr<const Model>> ApplyAdapter(std::shared_ptr<const Model> base,
                                                  const std::filesystem::path& adapter_dir,
                                                  const std::string& quantize = "none",
                                                  int64_t quantize_group = 64,
                                                  bool quantize_embeddings = false,
                                                  const std::string& device = "",
                                                  const std::string& dtype = "auto");

// What LoadModel found. The reference lives as long as `model`.
const ModelInfo& Info(const Model& model);

struct SamplingParams {
  float temperature = 0;         // 0 = greedy (top_k/top_p/min_p then unused)
  int top_k = 0;                 // 0 = off
  float top_p = 1;               // 1 = off
  float min_p = 0;               // 0 = off
  float repetition_penalty = 1;  // 1 = off; applies in greedy mode too
  std::optional<uint64_t> seed;  // same seed, model, device and request: same tokens
};

// Which tokens may come next (structured output: a grammar's matcher). The
// engine asks before every draw and masks the rest to -inf before the
// penalty and the warpers, then reports the token it chose; one constraint
// serves one sequence, on the worker thread.
class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Writes the allowed set into `allowed`: bit (i % 32) of word i / 32 is
  // token i, for (vocab_size + 31) / 32 words. At least one token must be
  // allowed (a grammar that has ended allows its stop tokens).
  virtual void FillAllowed(std::vector<int32_t>& allowed) = 0;
  // The token chosen at this step (one FillAllowed allowed).
  virtual void Accept(int32_t id) = 0;
};

struct GenerateRequest {
  std::vector<int32_t> prompt;  // non-empty, every id in [0, vocab_size)
  int max_new_tokens = 128;     // >= 0; prompt + max_new_tokens <= max_context
  SamplingParams sampling;
  std::optional<std::vector<int32_t>> stop_ids;  // default: the model's eos ids
  // Null: every token may come. Shared with the caller, which may read the
  // matcher's state after the run.
  std::shared_ptr<TokenConstraint> constraint;
  // Each token's log-probability and those of the top_logprobs most likely
  // tokens (0 to kMaxTopLogprobs); -1: none. Served by Batch (SequenceStep's
  // logprobs); Generate refuses anything but -1.
  int top_logprobs = -1;
};

inline constexpr int kMaxTopLogprobs = 20;

// A token's log-probability under the model: the log-softmax of its logits
// row as the model gives it, before the repetition penalty, temperature,
// top-k/top-p/min-p and a structured-output mask (what the model thinks of
// each token, whatever the sampler then did), in float32.
struct TokenLogprobs {
  float logprob = 0;  // the chosen token's
  // The most likely tokens, most likely first (ties in any order): id and
  // log-probability.
  std::vector<std::pair<int32_t, float>> top;
};

enum class FinishReason {
  kStop,       // a stop id was generated (it was passed to on_token)
  kLength,     // max_new_tokens were generated
  kCancelled,  // on_token returned false
};

struct GenerateResult {
  FinishReason finish = FinishReason::kLength;
  int prompt_tokens = 0;
  int new_tokens = 0;  // tokens passed to on_token, the stop id included
  double prefill_ms = 0;
  double decode_ms = 0;
  // Of decode_ms, the time the host waited for the device (Generate on the
  // device loop: each step's copy of the chosen id); decode_ms minus this is
  // the host's own time, which a GPU step should keep off its critical path.
  // 0 on the host loop.
  double decode_wait_ms = 0;
};

// Runs the prompt in one forward pass, then one token per step, calling
// on_token(id) for each new token in order (the stop token that ends a run
// included, as transformers returns it). on_token returning false cancels the
// run after that token. All memory the run used (KV cache, activations) is
// released when it returns. Failure: kInvalidRequest (bad request: empty
// prompt, id out of range, too long, bad sampling values), kGpuOom, kInternal.
// on_token must not throw.
Result<GenerateResult> Generate(const Model& model, const GenerateRequest& request,
                                const std::function<bool(int32_t)>& on_token);

// What the decode steps' CUDA graphs have done in this process
// (decode_graph.h): graphs captured, captures that failed (after the first,
// graphs are off and every step runs eagerly) and the first failure's
// message.
struct DecodeGraphCounts {
  int64_t captured = 0;
  int64_t failed = 0;
  std::string first_failure;
};
DecodeGraphCounts DecodeGraphStats();

// Testing only (medqd --test-device-loop-on-cpu): true makes runs on the CPU
// take the loop a GPU takes, so that it is checked where there is none: the
// sampler on tensors, the chosen ids fed back as tensors and copied out once
// a step, zeroed KV caches and the static decode step that a GPU captures as
// a CUDA graph (decode_graph.h; run eagerly here, with no graph to capture).
// Results equal the host loop's up to float rounding. Process-wide, an
// atomic: any thread may set it before the first run.
void SetDeviceLoopOnCpu(bool enabled);

// Sets the engine's process-wide knobs: num_threads CPU threads for the
// engine's kernels (<= 0: one per core), one LibTorch intra-op thread, no
// TF32. Call once, on the worker thread, before anything else.
void InitWorkerThread(int num_threads);

}  // namespace medq::engine
