// One generation on the worker thread, from its prompt to its `done` fields:
// the prompt's ids (tokenizer and chat template), the checks against the
// model, and the way each token becomes text (incremental detokenization,
// stop strings). The engine decodes it inside a batch (generations.h).
// Worker thread only.
#pragma once

#include <atomic>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/generate_params.h"
#include "common/messages.h"
#include "common/result.h"
#include "daemon/engine/batch.h"
#include "daemon/tokenizer/incremental_decoder.h"
#include "daemon/worker/memory_budget.h"
#include "daemon/worker/model_store.h"
#include "daemon/worker/report.h"
#include "daemon/worker/stop_strings.h"

namespace medq::daemon {

struct GenerateSpec {
  GenerateParams params;
  std::string model_name;  // as the request named it (or the default)
  std::filesystem::path model_dir;
  std::filesystem::path adapter_dir;  // empty: none
};

// A generation's way back to the loop. Generations calls it on the worker
// thread; the sink the loop hands WorkerPort::StartGeneration is called on
// the loop thread (the Worker posts each call there, worker_port.h).
struct GenerationSink {
  // A piece of stable text (with its ids and log-probabilities when the
  // request asked for them).
  std::function<void(TokenEvent event)> token;
  // The worker's state mid-run (the model it loaded, shown by `health`).
  std::function<void(WorkerReport report)> report;
  // The run joined its model's batch (its model loaded, its prompt read,
  // its memory admitted): it runs from the next step. Once at most, before
  // any token; a run that ends before that never calls it.
  std::function<void()> admitted;
  // The end, exactly once: the done fields, or the error the job fails with.
  std::function<void(Result<GenerateDone> done, WorkerReport report)> done;
};

// What the loop hands the worker to start a generation.
struct GenerationJob {
  std::string id;
  std::shared_ptr<const GenerateSpec> spec;
  // Set by the loop (cancel op, client gone, shutdown); read between steps.
  std::shared_ptr<const std::atomic<bool>> cancel;
  bool log_text = false;  // log_prompts: the prompt and output go to the log
  GenerationSink sink;
  int choice = 0;  // which of params.n answers (choices.h): seeded seed + choice
};

class Generation {
 public:
  // Reads the prompt with `model` and checks it (INVALID_REQUEST naming the
  // field: no tokens, too long for the context, ids outside the vocabulary).
  static Result<std::unique_ptr<Generation>> Prepare(GenerationJob job, const LoadedModel& model,
                                                     double load_ms);

  const GenerationJob& job() const { return job_; }
  const engine::GenerateRequest& request() const { return request_; }
  const engine::ModelInfo& info() const { return engine::Info(*model_); }
  const std::shared_ptr<const engine::Model>& model() const { return model_; }
  bool cancelled() const { return job_.cancel->load(); }

  // What the run needs on its device beyond the weights (memory_budget.h).
  MemoryEstimate Estimate() const;

  // A token from the engine (with its log-probabilities when the request
  // asked for them): detokenized, filtered for stop strings and sent to the
  // sink. False once a stop string has ended the output.
  bool OnToken(int32_t id, const std::optional<engine::TokenLogprobs>& logprobs = std::nullopt);

  // The end of the run with the engine's totals: flushes the text held back
  // and returns the done fields (finish "stop" when a stop string ended it).
  GenerateDone Finish(const engine::GenerateResult& result);

  // The engine's handle while the sequence is in a batch.
  std::optional<engine::SequenceId> sequence;

 private:
  Generation(GenerationJob job, const LoadedModel& model, double load_ms);
  void Emit(std::string text);
  TokenCandidate Candidate(int32_t id, float logprob) const;

  GenerationJob job_;
  std::shared_ptr<const engine::Model> model_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;  // kept: the store may unload
  std::string model_name_;
  double load_ms_ = 0;
  engine::GenerateRequest request_;
  std::optional<tokenizer::IncrementalDecoder> decoder_;
  StopStrings stops_;
  std::vector<int32_t> pending_ids_;
  std::vector<TokenLogprob> pending_logprobs_;
  // The whole output, kept when keeps_output_: with log_text, and for a
  // request whose answer is read for tool calls (ReadsToolCalls).
  const bool keeps_output_;
  std::string output_;
};

// Whether the answer to `params` is read for tool calls: tools given, and a
// tool_choice other than "none".
bool ReadsToolCalls(const GenerateParams& params);

// The ids a request's prompt stands for with this model (tokenizer and chat
// template applied as the request's mode says).
Result<std::vector<int32_t>> PromptIds(const LoadedModel& model, const GenerateParams& params);

// Whether the params' prompt goes through a chat template: `messages`, mode
// chat, or mode auto with a model that has a chat template of its own.
bool IsChat(const LoadedModel& model, const GenerateParams& params);

// The model's chat template (the fallback, chat::FallbackChatTemplate(), when
// it has none) rendered with the params' messages (or system and prompt),
// tools and template kwargs. INVALID_REQUEST when the template fails (line
// and column in the message).
Result<std::string> RenderChat(const LoadedModel& model, const GenerateParams& params,
                               bool add_generation_prompt);

}  // namespace medq::daemon
