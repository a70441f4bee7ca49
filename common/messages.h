// Typed results of the daemon's ops, with their JSON conversions. The daemon
// builds them, the CLI reads them; docs/protocol.md documents every field.
// Unknown fields are ignored when reading, and missing ones take the defaults
// below, so that a newer daemon and an older CLI still understand each other.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/tool_calls.h"

namespace medq {

struct DeviceMemoryInfo {
  int index = 0;
  std::string name;
  int64_t total_bytes = 0;
  bool measured = false;  // free/allocated/reserved: only while a model is on a GPU
  int64_t free_bytes = 0;
  int64_t allocated_bytes = 0;  // held by live tensors
  int64_t reserved_bytes = 0;   // held by the CUDA caching allocator
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DeviceMemoryInfo, index, name, total_bytes,
                                                measured, free_bytes, allocated_bytes,
                                                reserved_bytes)

// Host and device memory at one moment.
struct MemorySnapshot {
  int64_t rss_bytes = 0;
  std::vector<DeviceMemoryInfo> devices;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(MemorySnapshot, rss_bytes, devices)

// The limits in force, after configuration and device detection.
struct EffectiveLimits {
  int max_queue = 0;
  int max_connections = 0;
  int64_t max_message_bytes = 0;
  double idle_timeout_s = 0;
  double queue_timeout_s = 0;
  double drain_timeout_s = 0;
  int64_t max_gpu_memory_mb = 0;   // the GPU memory budget; 0: the device's free memory
  int max_concurrent = 1;          // generations decoded at once (1: the generation lock)
  int prefill_chunk_tokens = 0;    // prompt tokens read per step
  int embed_max_batch = 0;         // texts per embedding forward pass
  int embed_batch_timeout_ms = 0;  // longest a text waits for its batch
  int embed_max_concurrent = 0;    // embed requests in the batcher at once
  int embed_max_inputs = 0;        // texts in one embed request
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EffectiveLimits, max_queue, max_connections,
                                                max_message_bytes, idle_timeout_s, queue_timeout_s,
                                                drain_timeout_s, max_gpu_memory_mb, max_concurrent,
                                                prefill_chunk_tokens, embed_max_batch,
                                                embed_batch_timeout_ms, embed_max_concurrent,
                                                embed_max_inputs)

// A model the worker holds in memory.
struct LoadedModelInfo {
  std::string name;
  std::string architecture;
  std::string device;  // "cpu" or "cuda:N"
  std::string dtype;   // weights: "fp32", "bf16" or "fp16"
  // Generation models: the projections' quantization, "none", "int8" or
  // "int4" (quantize); when quantized, dtype is the embeddings' and
  // lm_head's, unless quantized_embeddings: they are in the same format.
  std::string quantization = "none";
  bool quantized_embeddings = false;
  int64_t parameter_bytes = 0;    // bytes of weights held, as quantized
  bool fell_back_to_cpu = false;  // CUDA ran out of memory while loading it
  bool has_tokenizer = false;
  bool has_chat_template = false;
  double idle_s = 0;
  std::string kind = "generation";  // "generation" or "embedding": the op that uses it
  int64_t dims = 0;                 // embedding models: the length of their vectors
  // Serves requests now: an embedding model once a warm-up embed succeeded,
  // a generation model once loaded.
  bool ready = true;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LoadedModelInfo, name, architecture, device, dtype,
                                                quantization, quantized_embeddings, parameter_bytes,
                                                fell_back_to_cpu, has_tokenizer, has_chat_template,
                                                idle_s, kind, dims, ready)

// The durable job store (daemon/store/) as health shows it: its size and
// row counts, never its contents.
struct StoreInfo {
  bool enabled = false;
  std::string path;    // the database file
  int64_t bytes = 0;   // on disk, with its write-ahead log
  int64_t queued = 0;  // accepted, not finished: they run again after a restart
  int64_t done = 0;
  int64_t failed = 0;
  int64_t cancelled = 0;
  int64_t timed_out = 0;
  int64_t lost = 0;        // ids given out whose records damage took (status says "lost")
  int64_t damaged = 0;     // rows found damaged since the start, not yet forgotten
  bool disk_full = false;  // the last write failed for want of space
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StoreInfo, enabled, path, bytes, queued, done,
                                                failed, cancelled, timed_out, lost, damaged,
                                                disk_full)

// A model's circuit breaker as health shows it (daemon/loop/circuit_breaker.h).
struct BreakerInfo {
  std::string model;
  std::string state;  // "closed", "open" or "half_open"
  int consecutive_errors = 0;
  int trips = 0;             // times it opened since its last success
  double retry_after_s = 0;  // open: the cool-down left; else 0
  std::string last_error;    // the last device error's message
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(BreakerInfo, model, state, consecutive_errors,
                                                trips, retry_after_s, last_error)

struct HealthInfo {
  std::string status;  // "ok", "starting", "draining" or "degraded"
  bool ready = false;  // true when the daemon can serve work now
  std::string version;
  double uptime_s = 0;
  int64_t pid = 0;
  bool cuda_available = false;
  MemorySnapshot memory;
  int active_jobs = 0;
  int queue_length = 0;
  int connections = 0;
  std::vector<LoadedModelInfo> loaded_models;
  std::vector<std::string> warnings;  // e.g. a device fallback; empty when all is well
  EffectiveLimits limits;
  StoreInfo store;
  std::vector<BreakerInfo> breakers;  // models with device errors counted or paused
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(HealthInfo, status, ready, version, uptime_s, pid,
                                                cuda_available, memory, active_jobs, queue_length,
                                                connections, loaded_models, warnings, limits, store,
                                                breakers)

// One job as `queue` lists it. Never carries prompt or generated text.
struct JobInfo {
  std::string job;        // daemon-assigned job id, e.g. "j42"
  std::string op;         // the op that created it, e.g. "cleanup-memory"
  std::string priority;   // "high", "normal" or "low"
  std::string state;      // "running", "starting" (slot held, not yet admitted) or "waiting"
  int position = 0;       // 0 while running; 1 = next to run in its class
  double waited_s = 0;    // time spent waiting in the queue so far
  std::string job_class;  // "generate" or "model": the queue it waits in
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(JobInfo, job, op, priority, state, position,
                                                waited_s, job_class)

struct QueueTotals {
  int64_t processed = 0;  // finished, successfully or with an error of their own
  int64_t rejected = 0;   // refused at submission (QUEUE_FULL, NOT_READY)
  int64_t timed_out = 0;  // left the queue with QUEUE_TIMEOUT
  int64_t cancelled = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(QueueTotals, processed, rejected, timed_out,
                                                cancelled)

struct QueueInfo {
  std::vector<JobInfo> running;
  std::vector<JobInfo> waiting;  // in the order they will run
  int max_queue = 0;
  QueueTotals totals;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(QueueInfo, running, waiting, max_queue, totals)

struct CleanupInfo {
  MemorySnapshot before;
  MemorySnapshot after;
  double duration_ms = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(CleanupInfo, before, after, duration_ms)

// A token the model could have put at a generated token's position, with
// its log-probability (natural log, under the model's own distribution:
// engine.h's TokenLogprobs).
struct TokenCandidate {
  int32_t id = 0;
  std::string token;           // its text, UTF-8 (a piece of a character shows as U+FFFD)
  std::vector<uint8_t> bytes;  // its exact bytes (empty for a model without a tokenizer)
  double logprob = 0;          // kMinLogprob for a probability that underflows to 0
};
inline constexpr double kMinLogprob = -9999.0;  // JSON has no -inf
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TokenCandidate, id, token, bytes, logprob)

// A generated token's candidate entry and the most likely tokens at its
// position, most likely first. JSON: the token's fields and "top_logprobs".
struct TokenLogprob {
  TokenCandidate chosen;
  std::vector<TokenCandidate> top;
};
void to_json(nlohmann::json& j, const TokenLogprob& t);
void from_json(const nlohmann::json& j, TokenLogprob& t);

// A `token` event (its fields beside id and event): a piece of stable text,
// with the ids (params.return_ids) and the log-probabilities
// (params.logprobs) of the tokens that completed it. ids and logprobs are
// absent from the JSON when empty; a token that ends the output (an
// end-of-sequence id) has an id but no text and no logprobs entry.
struct TokenEvent {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<TokenLogprob> logprobs;
  // The choice it belongs to, with params.n > 1 (absent from the JSON: -1).
  int index = -1;
};
void to_json(nlohmann::json& j, const TokenEvent& t);
void from_json(const nlohmann::json& j, TokenEvent& t);

// A `queued` event: the job waits at `position` (1 = next) of
// `queue_length` waiting jobs of its class, `estimated_wait_s` from now
// (docs/protocol.md, Queue).
struct QueuedEvent {
  std::string job;
  int position = 0;
  int queue_length = 0;
  double estimated_wait_s = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(QueuedEvent, job, position, queue_length,
                                                estimated_wait_s)

// A `started` event: the job left the queue and holds a slot.
struct StartedEvent {
  std::string job;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StartedEvent, job)

// The events of a generation before its end, in the order a client hears
// them: queued (zero or more), started, token (zero or more); then `done`
// (GenerateDone) or an error. The socket writes each as its JSON fields
// beside "id" and "event": EventName(); HTTP renders OpenAI chunks from them.
using GenerateEvent = std::variant<QueuedEvent, StartedEvent, TokenEvent>;
// "queued", "started" or "token".
std::string_view EventName(const GenerateEvent& event);
// The event's fields (beside id and event).
nlohmann::json EventFields(const GenerateEvent& event);
// The event a reply line carries (its "event" and fields); nullopt for any
// other event name ("done", "error", "result").
std::optional<GenerateEvent> GenerateEventOf(const nlohmann::json& reply);

// The `done` event of a generation (its fields beside id and event).
struct GenerateUsage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;  // the end-of-sequence token included
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GenerateUsage, prompt_tokens, completion_tokens)

struct GenerateTimings {
  double queued_ms = 0;   // submitted -> started
  double load_ms = 0;     // loading the model, when this job did
  double prefill_ms = 0;  // reading the prompt (the steps that read its chunks)
  double decode_ms = 0;   // first token -> last token
  double total_ms = 0;    // submitted -> done
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(GenerateTimings, queued_ms, load_ms, prefill_ms,
                                                decode_ms, total_ms)

// Why an answer ended: its end-of-sequence token or a stop string, its
// max_tokens, a cancellation (the client's, or its deadline's), or the calls
// it made (a request with tools). JSON: "stop", "length", "cancelled",
// "tool_calls"; a name a newer daemon might send reads as "stop".
enum class FinishReason { kStop, kLength, kCancelled, kToolCalls };
NLOHMANN_JSON_SERIALIZE_ENUM(FinishReason, {{FinishReason::kStop, "stop"},
                                            {FinishReason::kLength, "length"},
                                            {FinishReason::kCancelled, "cancelled"},
                                            {FinishReason::kToolCalls, "tool_calls"}})
// Its JSON name (the table above, the one list of the names).
std::string FinishReasonName(FinishReason reason);

// One answer's end, with params.n > 1 (GenerateDone::choices).
struct ChoiceDone {
  int index = 0;
  FinishReason finish_reason = FinishReason::kStop;
  int64_t completion_tokens = 0;
  std::vector<ToolCall> tool_calls;  // as GenerateDone's
  std::string content;
};
void to_json(nlohmann::json& j, const ChoiceDone& c);
void from_json(const nlohmann::json& j, ChoiceDone& c);

struct GenerateDone {
  FinishReason finish_reason = FinishReason::kStop;
  std::string model;
  std::string device;
  GenerateUsage usage;
  GenerateTimings timings;
  // The calls the answer made (a request with tools): then finish_reason is
  // kToolCalls and `content` the text outside them. Both absent from the
  // JSON otherwise.
  std::vector<ToolCall> tool_calls;
  std::string content;
  // With params.n > 1: every choice's end, by index (the fields above are
  // choice 0's; usage counts all of them). Absent from the JSON otherwise.
  std::vector<ChoiceDone> choices;
};
void to_json(nlohmann::json& j, const GenerateDone& done);
void from_json(const nlohmann::json& j, GenerateDone& done);

// Results of the model ops.
struct LoadResult {
  std::string model;
  std::string device;
  std::string dtype;
  double load_ms = 0;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LoadResult, model, device, dtype, load_ms)

struct UnloadResult {
  std::string model;
  bool unloaded = false;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(UnloadResult, model, unloaded)

struct TokenizeResult {
  std::vector<int32_t> ids;
  std::vector<std::string> tokens;  // the vocabulary's string of each id
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TokenizeResult, ids, tokens)

struct DetokenizeResult {
  std::string text;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(DetokenizeResult, text)

struct ApplyTemplateResult {
  std::string prompt;
  std::vector<int32_t> ids;  // empty when the model has no tokenizer
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ApplyTemplateResult, prompt, ids)

// The result of embed.
struct EmbedUsage {
  int64_t total_tokens = 0;  // over all inputs, special tokens included, after truncation
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EmbedUsage, total_tokens)

struct EmbedTimings {
  double queued_ms = 0;      // submitted -> admitted to the batcher
  double load_ms = 0;        // loading the model, when this job did
  double batch_wait_ms = 0;  // admitted -> its last batch began (forming batches)
  double embed_ms = 0;       // the forward passes of its batches
  double total_ms = 0;       // submitted -> result
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EmbedTimings, queued_ms, load_ms, batch_wait_ms,
                                                embed_ms, total_ms)

struct EmbedResult {
  std::string model;
  std::string device;
  int64_t dims = 0;                            // the length of every vector
  bool normalized = false;                     // the vectors have unit L2 norm
  std::vector<std::vector<float>> embeddings;  // one per input, in order
  std::vector<int64_t> tokens;                 // each input's token count
  std::vector<bool> truncated;                 // each input was cut at the model's limit
  EmbedUsage usage;
  EmbedTimings timings;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(EmbedResult, model, device, dims, normalized,
                                                embeddings, tokens, truncated, usage, timings)

struct VersionInfo {
  std::string version;
  int protocol = 0;
  std::string torch_version;
  bool cuda = false;
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(VersionInfo, version, protocol, torch_version, cuda)

}  // namespace medq
