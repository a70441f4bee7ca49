// Continuous batching: several sequences of one model decoded together, one
// token each per step, sequences joining and leaving between steps.
//
// Free of LibTorch types, like engine.h. Worker thread only (the thread that
// owns LibTorch); no exception escapes: failures come back as Result/Status.
//
// Each sequence has its own KV cache (allocated when it is added, for prompt
// + max_new_tokens), its own position and its own sampler, seeded from its
// own request: what a sequence produces does not depend on what runs beside
// it. On the CPU (float32 activations, float32 or bf16 weights) a batched
// step computes every row with the same arithmetic, in the same order, as a
// step of that sequence alone, so greedy and seeded outputs are bitwise those
// of a solo run; the projections read each weight once for all sequences. On
// other devices the projections are one batched linear each and attention
// runs per sequence; results equal a solo run up to float rounding.
//
// A prompt is read in chunks of at most `prefill_chunk_tokens` tokens, one
// chunk per step, so that a long prompt does not stall the sequences already
// decoding. Chunk boundaries depend only on the sequence's own prompt and the
// chunk size, never on its neighbours (batch invariance).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/result.h"
#include "daemon/engine/engine.h"

namespace medq::engine {

struct BatchOptions {
  // Prompt tokens a sequence reads per step while prefilling (>= 1).
  int prefill_chunk_tokens = 512;
  // Prompt tokens read per step across all prefilling sequences: at least one
  // chunk per step is read whatever this says; further chunks (of other
  // sequences, in the order they were added) only while the total stays
  // within it. Keeps a step short when several long prompts arrive at once.
  int prefill_budget_tokens = 512;
};

using SequenceId = uint64_t;

// What one step did for one sequence.
struct SequenceStep {
  SequenceId id = 0;
  // The new token, when the sequence produced one in this step (a sequence
  // still reading its prompt produces none until its last chunk).
  bool has_token = false;
  int32_t token = 0;
  // True when the sequence ended in this step: a stop id was produced (it is
  // `token`) or max_new_tokens were reached. The sequence has then left the
  // batch and its memory is freed; `result` holds its totals.
  bool finished = false;
  GenerateResult result;  // finish, prompt_tokens, new_tokens, prefill_ms, decode_ms
  // With the request's top_logprobs >= 0, `token`'s log-probability and the
  // top ones (engine.h); otherwise empty.
  std::optional<TokenLogprobs> logprobs;
};

class Batch {
 public:
  // An empty batch for `model` (kept alive by the batch).
  Batch(std::shared_ptr<const Model> model, BatchOptions options);
  ~Batch();
  Batch(const Batch&) = delete;
  Batch& operator=(const Batch&) = delete;

  // Adds a sequence; it starts reading its prompt at the next Step().
  // Validates the request as Generate() does (kInvalidRequest naming what is
  // wrong) and allocates its KV cache now (kGpuOom / kInternal when that
  // fails; the batch is unchanged then). max_new_tokens == 0 is refused here
  // (kInvalidRequest): the caller answers such a request without the engine.
  Result<SequenceId> Add(const GenerateRequest& request);

  // Removes a sequence (cancelled, or stopped by its caller, e.g. on a stop
  // string) and frees its memory. Its totals so far, with finish =
  // kCancelled; an unknown id gives a default GenerateResult. Never fails.
  GenerateResult Remove(SequenceId id);

  // Advances every sequence by one step: each decoding sequence gets its next
  // token, and prefilling sequences read their next chunk (within the prefill
  // budget; the sequence that ends its prompt gets its first token). Returns
  // one SequenceStep per sequence that produced a token or finished, in the
  // order the sequences were added. A step with no sequences returns nothing.
  //
  // Failure (kGpuOom, kInternal): the step did not complete for anyone; every
  // sequence of the batch has been removed and its memory freed, since their
  // caches may hold a half-written position. The caller fails them all.
  Result<std::vector<SequenceStep>> Step();

  size_t size() const;
  bool empty() const { return size() == 0; }
  // Sequences that have read their whole prompt.
  size_t decoding() const;
  const Model& model() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace medq::engine
