// Memory admission for generations (`max_gpu_memory_mb`): how much device
// memory a run will take, and whether it may start now.
//
// The estimate and the decision are pure functions of numbers, so that they
// are unit-tested without LibTorch; MeasureDeviceUsage and AdmitRun, which ask
// the engine about the device, are the worker-thread glue.
//
// Where the check sits: on the worker, per sequence, after the model is
// acquired and the prompt tokenized (its length is needed), before the engine
// allocates anything for it (worker/generations.h). Several generations may
// run at once (max_concurrent): what they hold, and will free when they end,
// is `releasable`, and a sequence that would fit once they end waits (kWait)
// rather than being refused. What is held beside them (loaded weights, other
// processes on the GPU) will not be freed by a job ending: a sequence that
// does not fit even without them is refused with INSUFFICIENT_MEMORY.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/result.h"
#include "daemon/engine/engine.h"

namespace medq::daemon {

class ModelStore;

// Bytes a run is expected to take on its device, beyond the loaded weights.
struct MemoryEstimate {
  int64_t kv_cache_bytes = 0;   // keys and values, allocated once for the whole run
  int64_t workspace_bytes = 0;  // activations at their peak (the prompt's forward pass)
  int64_t total() const { return kv_cache_bytes + workspace_bytes; }
};

// The KV cache of a run over `positions` tokens (prompt + max new tokens):
// 2 (keys and values) × layers × kv_heads × head_dim × element bytes × positions,
// exactly what the engine allocates (engine/kv_cache.h).
int64_t KvCacheBytes(const engine::ModelInfo& model, int64_t positions);

// The activation workspace of a run: an upper estimate of the prompt's forward
// pass, the largest step, one layer live at a time:
//   prompt × (4 × hidden + 2 × (heads + 2 × kv_heads) × head_dim + 3 × intermediate)
//     × element bytes                      residual, norm, q/k/v, MLP gate/up and product
//   + heads × prompt × prompt × (4 + element bytes)
//                                          attention scores (float32) and probabilities,
//                                          when the attention kernel materializes them
//   + 4 × vocab × 4                        last-position logits and the sampler's copies
//   + 2 × (prompt + max_tokens) × head_dim × 4   the RoPE tables
//   + on a GPU, per_token × element bytes + vocab × (4 + element bytes) + 2 MiB
//                                          the decode step's CUDA graph pool
// It errs high (a fused attention kernel keeps no scores): a job refused
// wrongly can be retried smaller, a job admitted wrongly dies of GPU_OOM.
int64_t WorkspaceBytes(const engine::ModelInfo& model, int64_t prompt_tokens, int64_t max_tokens);

MemoryEstimate EstimateRunMemory(const engine::ModelInfo& model, int64_t prompt_tokens,
                                 int64_t max_tokens);

// What the device the model runs on holds and can still give.
struct DeviceUsage {
  // Bytes this process holds live there (loaded weights, and any run's tensors).
  int64_t held_bytes = 0;
  // Bytes a new allocation can still get: the device's free memory plus what
  // the CUDA caching allocator holds unused. nullopt when unknown (the CPU).
  std::optional<int64_t> available_bytes;
};

struct AdmissionInput {
  MemoryEstimate estimate;
  int64_t budget_bytes = 0;  // max_gpu_memory_mb in bytes; 0: no budget
  DeviceUsage usage;
  // Of usage.held_bytes, what other running jobs hold and will free when they
  // end (0 while the queue runs one job at a time).
  int64_t releasable_bytes = 0;
};

enum class Verdict {
  kAdmit,   // fits the budget and the device now
  kWait,    // fits once the other running jobs have ended
  kRefuse,  // does not fit, and no running job will make room
};

struct Admission {
  Verdict verdict = Verdict::kAdmit;
  // For kWait and kRefuse: what does not fit, naming the estimate and the
  // budget (or the device's free memory), in MiB, for a person.
  std::string reason;
  // For kRefuse: true when the run does not fit even with nothing else held
  // (the budget or the device is too small for it): retrying the same request
  // cannot help; a shorter prompt or fewer max_tokens can.
  bool never_fits = false;
};

// Decides whether a run may start: it must fit both the budget (held +
// estimate <= budget, when there is one) and the device (estimate <=
// available, when known). Pure.
Admission Decide(const AdmissionInput& in);

// The hint sent with INSUFFICIENT_MEMORY. What is held when a job is refused
// (loaded weights until keep_alive_s or an unload, other processes' memory)
// is freed at times the daemon cannot predict; a short fixed hint lets a
// client retry without hammering.
inline constexpr double kInsufficientMemoryRetryAfterS = 5;

// The INSUFFICIENT_MEMORY error for a refusal (message: the reason and what
// to do; retry_after_s: the hint above).
Error RefusalError(const Admission& admission);

// How max_gpu_memory_mb applies.
struct BudgetPolicy {
  int64_t max_bytes = 0;  // 0: no budget beyond the device's free memory
  // The budget is about the GPU: a model on the CPU is exempt, unless this
  // test-only switch (medqd --test-fault-injection) applies it there too,
  // counting the weights of the models loaded on the CPU as held, so that CI
  // without a GPU exercises the refusal.
  bool apply_to_cpu = false;
};

// Worker thread: what `device` ("cpu" or "cuda:N") holds and has free. On
// CUDA, the caching allocator's live bytes and the driver's free memory; on
// the CPU, the weights of the models in `models` that run there, and the
// available memory unknown.
DeviceUsage MeasureDeviceUsage(const std::string& device, const ModelStore& models);

// What the sequences already running on one device are expected to take
// (the sum of their estimates), and of that their activation workspace,
// which is not allocated yet between steps.
struct RunningUsage {
  int64_t total_bytes = 0;
  int64_t workspace_bytes = 0;
};

// Worker thread: the admission of a run of `model` (on its device) needing
// `estimate`, beside the running sequences. A model on the CPU without
// policy.apply_to_cpu is always admitted. On CUDA the allocator's live bytes
// already hold the running sequences' KV caches, so only their workspace is
// added; on the CPU (the test policy) their whole estimate is.
Admission AdmitRun(const engine::ModelInfo& model, const ModelStore& models,
                   const MemoryEstimate& estimate, const RunningUsage& running,
                   const BudgetPolicy& policy);

}  // namespace medq::daemon
