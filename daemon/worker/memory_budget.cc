#include "daemon/worker/memory_budget.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <spdlog/spdlog.h>

#include "daemon/engine/device_memory.h"
#include "daemon/worker/model_store.h"

namespace medq::daemon {
namespace {

std::string Mib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string Describe(const MemoryEstimate& e) {
  return "an estimated " + Mib(e.total()) + " (KV cache " + Mib(e.kv_cache_bytes) +
         ", activations " + Mib(e.workspace_bytes) + ")";
}

}  // namespace

int64_t KvCacheBytes(const engine::ModelInfo& m, int64_t positions) {
  return 2 * m.num_layers * m.num_kv_heads * m.head_dim * m.compute_element_bytes * positions;
}

int64_t WorkspaceBytes(const engine::ModelInfo& m, int64_t prompt_tokens, int64_t max_tokens) {
  const int64_t e = m.compute_element_bytes;
  const int64_t per_token = 4 * m.hidden_size +
                            2 * (m.num_heads + 2 * m.num_kv_heads) * m.head_dim +
                            3 * m.intermediate_size;
  const int64_t layer = prompt_tokens * per_token * e;
  // The scores (float32, then the probabilities in the compute dtype) exist
  // only on the unfused path, T x T or a block of query rows x T; the fused
  // kernels work in tiles.
  const int64_t rows = m.attention_query_block > 0
                           ? std::min(prompt_tokens, m.attention_query_block)
                           : prompt_tokens;
  const int64_t scores =
      m.fused_causal_attention ? 0 : m.num_heads * rows * prompt_tokens * (4 + e);
  const int64_t logits = 4 * m.vocab_size * 4;
  const int64_t rope = 2 * (prompt_tokens + max_tokens) * m.head_dim * 4;
  // On a GPU the decode step's CUDA graph keeps a pool of its own while the
  // run decodes (engine/decode_graph.h): one step's activations and its
  // logits, in segments of at least 2 MiB, beside what the prefill left
  // cached.
  const int64_t graph =
      m.device == "cpu" ? 0 : per_token * e + m.vocab_size * (4 + e) + (int64_t{2} << 20);
  return layer + scores + logits + rope + graph;
}

MemoryEstimate EstimateRunMemory(const engine::ModelInfo& m, int64_t prompt_tokens,
                                 int64_t max_tokens) {
  return {KvCacheBytes(m, prompt_tokens + max_tokens),
          WorkspaceBytes(m, prompt_tokens, max_tokens)};
}

Admission Decide(const AdmissionInput& in) {
  const int64_t need = in.estimate.total();
  const int64_t held = in.usage.held_bytes;
  const int64_t releasable = std::min(in.releasable_bytes, held);
  const bool budgeted = in.budget_bytes > 0;
  const bool budget_now = !budgeted || held + need <= in.budget_bytes;
  const bool budget_later = !budgeted || held - releasable + need <= in.budget_bytes;
  const std::optional<int64_t>& avail = in.usage.available_bytes;
  const bool device_now = !avail || need <= *avail;
  const bool device_later = !avail || need <= *avail + releasable;

  Admission a;
  if (budget_now && device_now) return a;
  a.verdict = releasable > 0 && budget_later && device_later ? Verdict::kWait : Verdict::kRefuse;
  if (!budget_now) {
    a.reason = "the run needs " + Describe(in.estimate) + "; max_gpu_memory_mb allows " +
               Mib(in.budget_bytes) + ", of which " + Mib(held) + " are held (loaded weights" +
               (releasable > 0 ? ", running jobs" : "") + ")";
    a.never_fits = need > in.budget_bytes;
  } else {
    a.reason =
        "the run needs " + Describe(in.estimate) + "; the device has " + Mib(*avail) + " free";
    // The device's total is unknown here; free memory plus what this process
    // holds is the most a retry could find.
    a.never_fits = need > *avail + held;
  }
  return a;
}

Error RefusalError(const Admission& a) {
  std::string message = "not enough memory: " + a.reason + ". ";
  message += a.never_fits ? "Ask for fewer max_tokens or a shorter prompt, or raise "
                            "max_gpu_memory_mb."
                          : "Retry later, or unload a model (medq unload) to make room.";
  return Error(ErrorCode::kInsufficientMemory, std::move(message), kInsufficientMemoryRetryAfterS);
}

DeviceUsage MeasureDeviceUsage(const std::string& device, const ModelStore& models) {
  DeviceUsage usage;
  if (device.rfind("cuda:", 0) == 0) {
    const int index = std::atoi(device.c_str() + 5);
    for (const engine::DeviceMemory& d : engine::QueryDeviceMemory()) {
      if (d.index != index) continue;
      usage.held_bytes = d.allocated_bytes;
      usage.available_bytes = d.free_bytes + (d.reserved_bytes - d.allocated_bytes);
    }
    return usage;
  }
  for (const LoadedModel& m : models.loaded()) {
    const LoadedModelInfo info = m.Describe();
    if (info.device == device) usage.held_bytes += info.parameter_bytes;
  }
  return usage;
}

Admission AdmitRun(const engine::ModelInfo& model, const ModelStore& models,
                   const MemoryEstimate& estimate, const RunningUsage& running,
                   const BudgetPolicy& policy) {
  const bool on_cpu = model.device.rfind("cuda", 0) != 0;
  if (on_cpu && !policy.apply_to_cpu) return Admission{};
  AdmissionInput in;
  in.estimate = estimate;
  in.budget_bytes = policy.max_bytes;
  in.usage = MeasureDeviceUsage(model.device, models);
  if (on_cpu) {
    in.usage.held_bytes += running.total_bytes;
  } else {
    in.usage.held_bytes += running.workspace_bytes;
    if (in.usage.available_bytes) *in.usage.available_bytes -= running.workspace_bytes;
  }
  in.releasable_bytes = running.total_bytes;
  const Admission a = Decide(in);
  spdlog::debug("memory admission on {}: estimate {} bytes, held {}, releasable {}, budget {}: {}",
                model.device, in.estimate.total(), in.usage.held_bytes, in.releasable_bytes,
                in.budget_bytes, a.verdict == Verdict::kAdmit ? "admitted" : a.reason);
  return a;
}

}  // namespace medq::daemon
