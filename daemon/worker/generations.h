// The running generations on the worker thread: a step scheduler over the
// engine's continuous batches (engine/batch.h). Worker thread only.
//
// A generation the loop starts (its class had a free slot, see
// loop/scheduler.h) is prepared at once: its model acquired (loaded on first
// use), its prompt read and checked. It then waits for memory admission,
// which is per sequence: it joins its model's batch when its estimated KV
// cache and activations fit the budget and the device beside those already
// running; it waits while running sequences will free enough; it is refused
// (INSUFFICIENT_MEMORY) when nothing running would make room. Waiting ones
// are admitted in the order they came, none overtaking another.
//
// Each Step() then: ends cancelled generations (waiting or running), admits
// what fits, advances every batch by one step (a token for each decoding
// sequence, a prompt chunk for prefilling ones), turns each token into text,
// and ends the generations that finished (stop id, stop string, max_tokens)
// or failed. Ended generations report through their sink with a typed
// report; under `cleanup = after-each` memory is released once no generation
// is left running, before the reports are taken.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <vector>

#include "daemon/engine/batch.h"
#include "daemon/worker/generation.h"
#include "daemon/worker/memory_budget.h"
#include "daemon/worker/model_store.h"

namespace medq::daemon {

struct GenerationPolicy {
  BudgetPolicy budget;
  bool cleanup_after_each = true;
  engine::BatchOptions batch;
};

class Generations {
 public:
  Generations(ModelStore& models, GenerationPolicy policy)
      : models_(models), policy_(std::move(policy)) {}

  // Takes a generation the loop started. Failures (model, prompt) end it at
  // once through its sink.
  void Start(GenerationJob job);

  // True while any generation waits for admission or runs.
  bool busy() const { return !waiting_.empty() || !running_.empty(); }
  // How many wait for admission or run.
  int count() const { return static_cast<int>(waiting_.size() + running_.size()); }

  // One step of everything, as the header comment says.
  void Step();

  // Ends every generation, waiting or running, with `error` (after a bug
  // threw out of Step) and empties the batches.
  void FailAll(const Error& error);

 private:
  struct Ended {
    std::unique_ptr<Generation> generation;
    Result<GenerateDone> done;
  };
  // Ends a generation that failed before it was prepared.
  void Fail(const GenerationSink& sink, Error error);
  void Admit();
  void StepBatch(engine::Batch& batch);
  void End(std::unique_ptr<Generation> g, Result<GenerateDone> done);
  void EndRunning(engine::SequenceId seq, const engine::GenerateResult& result);
  void FailBatch(const engine::Model* model, const Error& error);
  void Report();
  engine::Batch& BatchFor(const std::shared_ptr<const engine::Model>& model);

  ModelStore& models_;
  GenerationPolicy policy_;
  std::vector<std::unique_ptr<Generation>> waiting_;  // admission order
  std::map<engine::SequenceId, std::unique_ptr<Generation>> running_;
  std::map<const engine::Model*, std::unique_ptr<engine::Batch>> batches_;
  std::vector<Ended> ended_;  // reported at the end of the step
  bool loaded_this_step_ = false;
  ModelLoadReport last_load_;
};

}  // namespace medq::daemon
