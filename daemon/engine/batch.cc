#include "daemon/engine/batch.h"

#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "common/elapsed.h"
#include "daemon/engine/batch_forward.h"
#include "daemon/engine/batch_testing.h"
#include "daemon/engine/decode_graph.h"
#include "daemon/engine/fault_injection.h"
#include "daemon/engine/generate.h"
#include "daemon/engine/kv_cache.h"
#include "daemon/engine/model.h"
#include "daemon/engine/request_validation.h"
#include "daemon/engine/sampling.h"
#include "daemon/engine/token_mask.h"
#include "daemon/engine/torch_errors.h"
#include "daemon/engine/transformer.h"

namespace medq::engine {
namespace {

using Clock = std::chrono::steady_clock;

BatchLogitsObserver& Observer() {
  static BatchLogitsObserver observer;
  return observer;
}

}  // namespace

// A named namespace, not an anonymous one: Batch::Impl holds Sequences, and a
// class with external linkage may not hold a type with internal linkage once
// a unity build makes this file an included one (-Wsubobject-linkage).
namespace batch_detail {

// One sequence of the batch: everything it owns (cache, sampler, history),
// freed when it leaves.
struct Sequence {
  SequenceId id = 0;
  std::vector<int32_t> prompt;
  int max_new_tokens = 0;
  std::vector<int32_t> stop;
  std::unique_ptr<KvCache> cache;  // one sequence, prompt + max_new_tokens positions
  std::unique_ptr<Sampler> sampler;
  std::shared_ptr<TokenConstraint> constraint;  // null: none
  std::vector<int32_t> mask_words;              // the constraint's scratch
  std::vector<int32_t> history;  // host loop: prompt + generated ids, for the penalty
  at::Tensor device_id;          // device loop: the last id, 0-dim int64 on the device
  int64_t prompt_read = 0;       // prompt tokens in the cache
  bool decoding = false;         // prompt read; last_token is the next step's input
  int32_t last_token = 0;
  int top_logprobs = -1;                       // the request's: -1 none
  std::optional<TokenLogprobs> last_logprobs;  // last_token's, when asked for
  Clock::time_point first_token_at;
  GenerateResult result;
  // This step: a chunk read, a token produced.
  bool read_chunk = false;
  bool produced = false;
};

bool IsStop(const Sequence& s, int32_t id) {
  return std::find(s.stop.begin(), s.stop.end(), id) != s.stop.end();
}

}  // namespace batch_detail

using batch_detail::Sequence;

void SetBatchLogitsObserver(BatchLogitsObserver observer) {
  Observer() = std::move(observer);
}

struct Batch::Impl {
  std::shared_ptr<const Model> model;
  BatchOptions options;
  bool device_loop = false;
  std::vector<std::unique_ptr<Sequence>> sequences;  // in the order they were added
  SequenceId next_id = 1;
  at::Tensor host_ids;  // device loop: the step's ids, pinned on CUDA; grown as needed

  // The prefilling sequences that read a chunk this step: the first always,
  // then others in order while the budget holds.
  std::vector<Sequence*> PlanPrefill() const {
    std::vector<Sequence*> out;
    int64_t tokens = 0;
    for (const auto& s : sequences) {
      if (s->decoding) continue;
      const int64_t left = static_cast<int64_t>(s->prompt.size()) - s->prompt_read;
      const int64_t n = std::min<int64_t>(options.prefill_chunk_tokens, left);
      if (!out.empty() && tokens + n > options.prefill_budget_tokens) break;
      out.push_back(s.get());
      tokens += n;
    }
    return out;
  }

  // Reads the next chunk of s's prompt; returns the last position's logits
  // ([vocab]) when the chunk ends the prompt, else an undefined tensor.
  at::Tensor ReadChunk(Sequence& s) {
    const int64_t left = static_cast<int64_t>(s.prompt.size()) - s.prompt_read;
    const int64_t n = std::min<int64_t>(options.prefill_chunk_tokens, left);
    const std::vector<int64_t> chunk(s.prompt.begin() + s.prompt_read,
                                     s.prompt.begin() + s.prompt_read + n);
    at::Tensor logits = Forward(*model, at::tensor(chunk, at::kLong).view({1, -1}), *s.cache,
                                LogitsFor::kLastPosition);
    s.prompt_read += n;
    s.read_chunk = true;
    return n == left ? logits.view({-1}) : at::Tensor();
  }

  // One token for every decoding sequence, all in one forward pass; their
  // logits rows in `rows`.
  // On the device loop through the model's DecodeGraphs, else ForwardRows.
  void DecodeAll(const std::vector<Sequence*>& decoders, std::vector<at::Tensor>& rows) {
    std::vector<int64_t> ids;
    std::vector<KvCache*> caches;
    std::vector<at::Tensor> device_ids;
    for (Sequence* s : decoders) {
      caches.push_back(s->cache.get());
      if (device_loop) {
        device_ids.push_back(s->device_id);
      } else {
        ids.push_back(s->last_token);
      }
    }
    FailIfArmed(Fault::kDecodeOom);
    FailIfArmed(Fault::kDecodeError);
    at::Tensor logits;
    if (device_loop) {
      // Gathered on the device: the step's input never comes back from the host.
      logits = DecodeGraphsOf(*model).Step(
          caches, device_ids.size() == 1 ? device_ids[0] : at::stack(device_ids));
    } else {
      logits = ForwardRows(*model, ids, caches);
    }
    for (size_t i = 0; i < decoders.size(); ++i)
      rows.push_back(logits[static_cast<int64_t>(i)]);
  }

  // The log-probabilities of s's chosen token and its top alternatives,
  // from its raw logits row ([vocab], where the model is): log-softmax,
  // top-k and the chosen entry there, then one copy of k + 1 values and k
  // ids to the host.
  static TokenLogprobs LogprobsOf(const Sequence& s, const at::Tensor& row) {
    const at::Tensor lp = row.to(at::kFloat).log_softmax(0);
    const auto [values, indices] = lp.topk(std::min<int64_t>(s.top_logprobs, lp.size(0)));
    // The chosen entry as a view: its id is on the host already.
    const at::Tensor host_values = at::cat({lp.narrow(0, s.last_token, 1), values}).cpu();
    const at::Tensor host_ids = indices.to(at::kLong).cpu();
    TokenLogprobs out;
    out.logprob = host_values[0].item<float>();
    const float* v = host_values.data_ptr<float>();
    const int64_t* ids = host_ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < host_ids.numel(); ++i)
      out.top.emplace_back(static_cast<int32_t>(ids[i]), v[i + 1]);
    return out;
  }

  // Chooses each producer's token from its logits row: on the host, or on the
  // device with one device-to-host copy of all the step's ids.
  // A step that only read non-final prompt chunks has no producer: nothing
  // to choose, and no copy to make (stacking an empty list would throw).
  void Choose(const std::vector<Sequence*>& producers, const std::vector<at::Tensor>& rows) {
    if (producers.empty()) return;
    ChooseTokens(producers, rows);
    for (size_t i = 0; i < producers.size(); ++i) {
      Sequence& s = *producers[i];
      s.last_logprobs.reset();
      if (s.top_logprobs >= 0) s.last_logprobs = LogprobsOf(s, rows[i]);
    }
  }

  void ChooseTokens(const std::vector<Sequence*>& producers, const std::vector<at::Tensor>& rows) {
    if (Observer()) {
      for (size_t i = 0; i < producers.size(); ++i)
        Observer()(producers[i]->id, rows[i]);
    }
    // A sequence with a constraint sees only its allowed tokens, and tells
    // it the one chosen.
    const auto masked = [&](Sequence& s, const at::Tensor& row) {
      return s.constraint != nullptr ? MaskLogits(row, *s.constraint, s.mask_words, device_loop)
                                     : row;
    };
    if (!device_loop) {
      for (size_t i = 0; i < producers.size(); ++i) {
        Sequence& s = *producers[i];
        s.last_token = s.sampler->Next(masked(s, rows[i]), s.history);
        s.history.push_back(s.last_token);
        if (s.constraint != nullptr) s.constraint->Accept(s.last_token);
      }
      return;
    }
    // Rows whose choice is their argmax (greedy, no penalty, no constraint:
    // the usual extraction request) are picked by one argmax over all of
    // them, where each row alone would cost a conversion and an argmax; the
    // others choose one at a time. Either way the same ids (argmax is
    // exact, and bf16 to float32 too).
    std::vector<size_t> order, others;  // producers' indices: argmax rows first
    for (size_t i = 0; i < producers.size(); ++i) {
      const Sequence& s = *producers[i];
      (s.constraint == nullptr && s.sampler->PicksArgmax() ? order : others).push_back(i);
    }
    std::vector<at::Tensor> chosen;  // the ids in `order`'s order, in pieces
    if (!order.empty()) {
      std::vector<at::Tensor> plain;
      for (const size_t i : order)
        plain.push_back(rows[i]);
      const at::Tensor picked =
          (plain.size() == 1 ? plain[0].unsqueeze(0) : at::stack(plain)).argmax(1);
      for (size_t j = 0; j < order.size(); ++j)
        producers[order[j]]->device_id = picked[static_cast<int64_t>(j)];
      chosen.push_back(picked);
    }
    for (const size_t i : others) {
      Sequence& s = *producers[i];
      s.device_id = s.sampler->NextOnDevice(masked(s, rows[i]));
      s.sampler->Observe(s.device_id);
      chosen.push_back(s.device_id.view({1}));
      order.push_back(i);
    }
    const auto n = static_cast<int64_t>(order.size());
    if (!host_ids.defined() || host_ids.size(0) < n) {
      host_ids =
          at::empty({std::max<int64_t>(n, 8)},
                    at::TensorOptions().dtype(at::kLong).pinned_memory(model->device.is_cuda()));
    }
    at::Tensor host = host_ids.narrow(0, 0, n);
    // The one transfer of the step.
    host.copy_(chosen.size() == 1 ? chosen[0] : at::cat(chosen));
    const int64_t* ids = host.data_ptr<int64_t>();
    for (int64_t j = 0; j < n; ++j) {
      Sequence& s = *producers[order[static_cast<size_t>(j)]];
      s.last_token = static_cast<int32_t>(ids[j]);
      if (s.constraint != nullptr) s.constraint->Accept(s.last_token);
    }
  }

  std::vector<SequenceStep> RunStep() {
    const auto t0 = Clock::now();
    std::vector<Sequence*> decoders, producers;
    std::vector<at::Tensor> rows;
    for (const auto& s : sequences) {
      s->read_chunk = s->produced = false;
      if (s->decoding) decoders.push_back(s.get());
    }
    for (Sequence* s : PlanPrefill()) {
      at::Tensor last = ReadChunk(*s);
      if (!last.defined()) continue;
      producers.push_back(s);
      rows.push_back(std::move(last));
    }
    if (!decoders.empty()) DecodeAll(decoders, rows);
    producers.insert(producers.end(), decoders.begin(), decoders.end());
    Choose(producers, rows);

    const auto t1 = Clock::now();
    for (Sequence* s : producers) {
      s->produced = true;
      ++s->result.new_tokens;
      if (!s->decoding) {
        s->decoding = true;
        s->first_token_at = t1;
      }
    }
    std::vector<SequenceStep> out;
    for (auto& s : sequences) {
      if (s->read_chunk) s->result.prefill_ms += MsBetween(t0, t1);
      if (!s->produced) continue;
      SequenceStep step;
      step.id = s->id;
      step.has_token = true;
      step.token = s->last_token;
      step.logprobs = std::move(s->last_logprobs);
      if (IsStop(*s, s->last_token)) {
        step.finished = true;
        s->result.finish = FinishReason::kStop;
      } else if (s->result.new_tokens >= s->max_new_tokens) {
        step.finished = true;
        s->result.finish = FinishReason::kLength;
      }
      if (step.finished) {
        s->result.decode_ms = MsBetween(s->first_token_at, t1);
        step.result = s->result;
        s.reset();  // frees the cache now
      }
      out.push_back(step);
    }
    std::erase(sequences, nullptr);
    return out;
  }
};

Batch::Batch(std::shared_ptr<const Model> model, BatchOptions options)
    : impl_(std::make_unique<Impl>()) {
  options.prefill_chunk_tokens = std::max(1, options.prefill_chunk_tokens);
  impl_->model = std::move(model);
  impl_->options = options;
  impl_->device_loop = impl_->model != nullptr && UsesDeviceLoop(*impl_->model);
}

Batch::~Batch() = default;

Result<SequenceId> Batch::Add(const GenerateRequest& r) {
  if (impl_->model == nullptr) return Error(ErrorCode::kInternal, "Batch: no model");
  const Model& m = *impl_->model;
  const Status valid = ValidateRequest(m, r);
  if (!valid.ok()) return valid.error();
  if (r.max_new_tokens == 0) {
    return Error(ErrorCode::kInvalidRequest,
                 "max_new_tokens must be >= 1 for a sequence of a batch");
  }
  try {
    c10::InferenceMode inference_mode;
    auto s = std::make_unique<Sequence>();
    s->prompt = r.prompt;
    s->max_new_tokens = r.max_new_tokens;
    s->stop = r.stop_ids ? *r.stop_ids : m.info.eos_ids;
    s->result.prompt_tokens = static_cast<int>(r.prompt.size());
    s->cache = std::make_unique<KvCache>(
        m, 1, static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens, impl_->device_loop);
    s->sampler = std::make_unique<Sampler>(r.sampling);
    s->constraint = r.constraint;
    s->top_logprobs = r.top_logprobs;
    if (impl_->device_loop) {
      s->sampler->StartOnDevice(r.prompt, m.config.vocab_size, m.device);
    } else {
      s->history = r.prompt;
      s->history.reserve(r.prompt.size() + static_cast<size_t>(r.max_new_tokens));
    }
    s->id = impl_->next_id++;
    impl_->sequences.push_back(std::move(s));
    return impl_->sequences.back()->id;
  } catch (...) {
    return ErrorFromCurrentException("adding a sequence to a batch of model " + m.dir.string());
  }
}

GenerateResult Batch::Remove(SequenceId id) {
  auto& seqs = impl_->sequences;
  const auto it =
      std::find_if(seqs.begin(), seqs.end(), [id](const auto& s) { return s->id == id; });
  if (it == seqs.end()) return GenerateResult{};
  GenerateResult result = (*it)->result;
  result.finish = FinishReason::kCancelled;
  if ((*it)->decoding) result.decode_ms = MsBetween((*it)->first_token_at, Clock::now());
  seqs.erase(it);
  return result;
}

Result<std::vector<SequenceStep>> Batch::Step() {
  if (impl_->sequences.empty()) return std::vector<SequenceStep>{};
  try {
    c10::InferenceMode inference_mode;
    return impl_->RunStep();
  } catch (...) {
    const Error error =
        ErrorFromCurrentException("decoding a batch of " + std::to_string(impl_->sequences.size()) +
                                  " sequences with model " + impl_->model->dir.string());
    impl_->sequences.clear();  // their caches may hold a half-written position
    return error;
  }
}

size_t Batch::size() const {
  return impl_->sequences.size();
}

size_t Batch::decoding() const {
  return static_cast<size_t>(std::count_if(impl_->sequences.begin(), impl_->sequences.end(),
                                           [](const auto& s) { return s->decoding; }));
}

const Model& Batch::model() const {
  return *impl_->model;
}

}  // namespace medq::engine
