#include "daemon/engine/generate.h"

#include "common/elapsed.h"
#include "daemon/engine/fault_injection.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>

#include "daemon/engine/batch.h"
#include "daemon/engine/decode_graph.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/request_validation.h"
#include "daemon/engine/sampling.h"
#include "daemon/engine/token_mask.h"
#include "daemon/engine/transformer.h"

namespace medq::engine {
namespace {

using Clock = std::chrono::steady_clock;

std::atomic<bool> g_device_loop_on_cpu{false};

// The ids of one run: chosen by the sampler, fed back to the model, and
// handed to the caller. On the host path the id goes to a reusable host
// tensor; on the device path it stays where the model is, and one small copy
// to pinned memory tells the caller.
class TokenLoop {
 public:
  TokenLoop(const Model& m, const GenerateRequest& r, Sampler& sampler)
      : sampler_(sampler), constraint_(r.constraint.get()), on_device_(UsesDeviceLoop(m)) {
    if (on_device_) {
      sampler_.StartOnDevice(r.prompt, m.config.vocab_size, m.device);
      host_id_ =
          at::empty({1}, at::TensorOptions().dtype(at::kLong).pinned_memory(m.device.is_cuda()));
    } else {
      history_ = r.prompt;
      history_.reserve(r.prompt.size() + static_cast<size_t>(r.max_new_tokens));
      step_ids_ = at::empty({1, 1}, at::kLong);
    }
  }

  // Chooses the next id from `logits` ([vocab]); returns it for the caller.
  // With a constraint, the disallowed tokens are masked first and the
  // choice is reported to it.
  int32_t Choose(const at::Tensor& raw_logits) {
    const at::Tensor logits = constraint_ != nullptr
                                  ? MaskLogits(raw_logits, *constraint_, mask_words_, on_device_)
                                  : raw_logits;
    int32_t id = 0;
    if (on_device_) {
      const at::Tensor chosen = sampler_.NextOnDevice(logits);
      sampler_.Observe(chosen);
      const auto t0 = Clock::now();
      host_id_.copy_(chosen.view({1}));  // the one transfer of the step: waits for the device
      wait_ms_ += MsSince(t0);
      step_ids_ = chosen.view({1, 1});
      id = static_cast<int32_t>(host_id_.data_ptr<int64_t>()[0]);
    } else {
      id = sampler_.Next(logits, history_);
      history_.push_back(id);
      step_ids_.fill_(static_cast<int64_t>(id));
    }
    if (constraint_ != nullptr) constraint_->Accept(id);
    return id;
  }

  // The input of the next step: the id just chosen, [1, 1] int64.
  const at::Tensor& step_ids() const { return step_ids_; }
  // Time spent waiting for the device in Choose, in ms.
  double wait_ms() const { return wait_ms_; }

 private:
  Sampler& sampler_;
  TokenConstraint* const constraint_;  // null: none
  std::vector<int32_t> mask_words_;
  const bool on_device_;
  std::vector<int32_t> history_;  // host path: prompt + generated ids, for the penalty
  at::Tensor step_ids_;
  at::Tensor host_id_;
  double wait_ms_ = 0;
};

}  // namespace

void SetDeviceLoopOnCpu(bool enabled) {
  g_device_loop_on_cpu.store(enabled);
}

void WarmUp(const Model& m) {
  try {
    c10::InferenceMode inference_mode;
    const FaultsHeldBack not_for_the_warm_up;
    UseWorkerStream(m.device);  // first: everything below then runs there
    const BatchOptions options;
    const int64_t chunk =
        std::min<int64_t>(options.prefill_chunk_tokens, (m.config.max_position_embeddings - 8) / 2);
    if (chunk < 1) return;
    // As the daemon runs a request: a prompt of two chunks (from position 0,
    // then at an offset), its first token, three decode steps (a capture and
    // its replays), the device sampler and the pinned copy of the ids.
    GenerateRequest r;
    r.prompt.assign(static_cast<size_t>(2 * chunk), 0);
    r.max_new_tokens = 4;
    r.stop_ids = std::vector<int32_t>{};
    // A Batch shares the model without owning it here: the aliasing
    // constructor holds nothing.
    Batch batch(std::shared_ptr<const Model>(std::shared_ptr<const Model>(), &m), options);
    if (batch.Add(r).ok()) {
      while (!batch.empty() && batch.Step().ok()) {
      }
    }
    // As Generate runs one (engine_bench, medq-run): its own pinned id.
    r.prompt.resize(8);
    r.max_new_tokens = 3;
    (void)RunGeneration(m, r, [](int32_t) { return true; });
  } catch (...) {  // see the header: the first request reports it
  }
}

bool UsesDeviceLoop(const Model& m) {
  return !m.device.is_cpu() || m.device_quantized_form || g_device_loop_on_cpu.load();
}

Result<GenerateResult> RunGeneration(const Model& m, const GenerateRequest& r,
                                     const std::function<bool(int32_t)>& on_token) {
  const Status valid = ValidateRequest(m, r);
  if (!valid.ok()) return valid.error();
  if (r.top_logprobs != -1) {
    return Error(ErrorCode::kInvalidRequest,
                 "log-probabilities come from a Batch (engine/batch.h), not from Generate");
  }
  c10::InferenceMode inference_mode;
  GenerateResult result;
  result.prompt_tokens = static_cast<int>(r.prompt.size());
  if (r.max_new_tokens == 0) return result;

  const std::vector<int32_t>& stop = r.stop_ids ? *r.stop_ids : m.info.eos_ids;
  Sampler sampler(r.sampling);
  // Everything below is local: the cache (allocated once, for the whole run)
  // and activations are freed on return, whichever way the run ends (an
  // exception included).
  const bool device_loop = UsesDeviceLoop(m);
  KvCache cache(m, 1, static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens, device_loop);
  TokenLoop loop(m, r, sampler);

  const auto t_prefill = Clock::now();
  const std::vector<int64_t> prompt64(r.prompt.begin(), r.prompt.end());
  at::Tensor logits =
      Forward(m, at::tensor(prompt64, at::kLong).view({1, -1}), cache, LogitsFor::kLastPosition);
  int32_t next = loop.Choose(logits.view({-1}));
  result.prefill_ms = MsSince(t_prefill);

  const auto t_decode = Clock::now();
  const double waited_in_prefill = loop.wait_ms();
  while (true) {
    ++result.new_tokens;
    const bool keep_going = on_token(next);
    if (std::find(stop.begin(), stop.end(), next) != stop.end()) {
      result.finish = FinishReason::kStop;
      break;
    }
    if (!keep_going) {
      result.finish = FinishReason::kCancelled;
      break;
    }
    if (result.new_tokens >= r.max_new_tokens) {
      result.finish = FinishReason::kLength;
      break;
    }
    FailIfArmed(Fault::kDecodeOom);
    FailIfArmed(Fault::kDecodeError);
    if (device_loop) {
      KvCache* const rows[] = {&cache};
      logits = DecodeGraphsOf(m).Step(rows, loop.step_ids());
    } else {
      logits = Forward(m, loop.step_ids(), cache, LogitsFor::kLastPosition);
    }
    next = loop.Choose(logits.view({-1}));
  }
  result.decode_ms = MsSince(t_decode);
  result.decode_wait_ms = loop.wait_ms() - waited_in_prefill;
  return result;
}

}  // namespace medq::engine
