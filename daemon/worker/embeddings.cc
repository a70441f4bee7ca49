#include "daemon/worker/embeddings.h"

#include <algorithm>
#include <cmath>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/elapsed.h"
#include "daemon/tokenizer/normalizer.h"
#include "daemon/worker/memory.h"

namespace medq::daemon {
namespace {

using Clock = std::chrono::steady_clock;

std::string InputField(const EmbedRequest& r, size_t i) {
  return r.input_is_list ? "params.input[" + std::to_string(i) + "]" : "params.input";
}

// sentence-transformers' do_lower_case is Python's str.lower(); the
// tokenizers' Lowercase normalizer gives the same mapping.
const tokenizer::Normalizer& Lowercase() {
  static const std::unique_ptr<tokenizer::Normalizer> lowercase = [] {
    auto n = tokenizer::ParseNormalizer(nlohmann::json{{"type", "Lowercase"}});
    return n.ok() ? std::move(*n) : nullptr;
  }();
  return *lowercase;
}

// The model's vector cut to `dims` components, then of unit L2 norm when
// `normalize` (torch.nn.functional.normalize: x / max(||x||, 1e-12)).
std::vector<float> Finish(std::vector<float> v, int64_t dims, bool normalize) {
  v.resize(static_cast<size_t>(dims));
  if (normalize) {
    double sum = 0;
    for (const float x : v)
      sum += static_cast<double>(x) * x;
    const double norm = std::max(std::sqrt(sum), 1e-12);
    for (float& x : v)
      x = static_cast<float>(x / norm);
  }
  return v;
}

}  // namespace

Result<std::unique_ptr<Embeddings::Request>> Embeddings::Prepare(EmbedJob& job) {
  const EmbedSpec& spec = *job.spec;
  const EmbedRequest& req = spec.request;
  const int loads_before = models_.loads();
  const auto t0 = Clock::now();
  auto model = models_.Acquire(spec.model_name, spec.model_dir, {});
  const double load_ms = MsBetween(t0, Clock::now());
  const bool loaded = models_.loads() != loads_before && !models_.loaded().empty();
  if (loaded) load_ = ModelLoadReport{load_ms, models_.loaded().front().fell_back_to_cpu};
  if (!model.ok()) return std::move(model).error();
  const LoadedModel& m = **model;
  if (Status st = RequireKind(m.name, m.kind(), ModelKind::kEmbedding); !st.ok()) return st.error();
  if (loaded) job.sink.report(MakeReport(models_, /*measure=*/false));  // health shows it
  const engine::EmbeddingInfo& info = engine::Info(*m.embedding);

  auto r = std::make_unique<Request>();
  r->model = m.embedding;
  r->tokenizer = m.tokenizer;
  r->model_name = m.name;
  r->load_ms = loaded ? load_ms : 0;
  r->normalize = req.normalize.value_or(info.normalize);
  r->dims = info.dims;
  if (req.dimensions) {
    if (*req.dimensions > info.dims) {
      return InvalidRequest("params.dimensions " + std::to_string(*req.dimensions) +
                            " is more than the " + std::to_string(info.dims) + " dimensions of " +
                            m.name);
    }
    r->dims = *req.dimensions;
  }
  EmbedResult& out = r->result;
  out.model = spec.model_name;
  out.device = info.device;
  out.dims = r->dims;
  out.normalized = r->normalize;
  out.embeddings.resize(req.input.size());
  out.tokens.resize(req.input.size());
  out.truncated.resize(req.input.size());
  return r;
}

void Embeddings::Start(EmbedJob job) {
  const auto admitted = Clock::now();
  auto prepared = Prepare(job);
  if (!prepared.ok()) {
    ended_.push_back(Ended{job.sink, std::move(prepared).error()});
    return Report();
  }
  std::unique_ptr<Request> r = std::move(*prepared);
  const EmbedRequest& req = job.spec->request;
  const engine::EmbeddingInfo& info = engine::Info(*r->model);
  std::vector<PendingText> texts;
  texts.reserve(req.input.size());
  for (size_t i = 0; i < req.input.size(); ++i) {
    std::string text = req.input[i];
    if (info.do_lower_case) Lowercase().Normalize(text);
    std::vector<int32_t> ids = r->tokenizer->Encode(text, /*add_special_tokens=*/true);
    const auto n = static_cast<int64_t>(ids.size());
    if (n == 0) {
      ended_.push_back(Ended{job.sink, InvalidRequest(InputField(req, i) + " gives no tokens")});
      return Report();
    }
    if (n > info.max_seq_length) {
      if (!req.truncate) {
        ended_.push_back(
            Ended{job.sink,
                  InvalidRequest(InputField(req, i) + " is " + std::to_string(n) +
                                 " tokens, more than the " + std::to_string(info.max_seq_length) +
                                 " of " + r->model_name + "; shorten it or leave truncate on")});
        return Report();
      }
      // Cut the text, keep the closing special token ([SEP], </s>): what
      // the Hugging Face tokenizer's truncation gives for these models.
      const int32_t last = ids.back();
      ids.resize(static_cast<size_t>(info.max_seq_length - 1));
      ids.push_back(last);
      r->result.truncated[i] = true;
    }
    r->result.tokens[i] = static_cast<int64_t>(ids.size());
    r->result.usage.total_tokens += static_cast<int64_t>(ids.size());
    texts.push_back(PendingText{r.get(), i, std::move(ids), admitted});
  }
  r->job = std::move(job);
  r->admitted = admitted;
  r->remaining = texts.size();
  for (PendingText& t : texts)
    pending_.push_back(std::move(t));
  requests_.emplace(r->job.id, std::move(r));
  UpdateCount();
}

Embeddings::Clock::time_point Embeddings::NextDue() const {
  if (pending_.empty()) return Clock::time_point::max();
  if (static_cast<int>(pending_.size()) >= policy_.limits.max_batch)
    return Clock::time_point::min();
  return pending_.front().arrived + policy_.batch_timeout;
}

void Embeddings::EndCancelled() {
  std::vector<std::string> cancelled;
  for (const auto& [id, r] : requests_) {
    if (r->job.cancel && r->job.cancel->load()) cancelled.push_back(id);
  }
  for (const std::string& id : cancelled)
    End(id, Error(ErrorCode::kCancelled, "the embed request was cancelled"));
}

void Embeddings::End(const std::string& id, Result<EmbedResult> result) {
  auto it = requests_.find(id);
  if (it == requests_.end()) return;
  const Request* r = it->second.get();
  pending_.erase(std::remove_if(pending_.begin(), pending_.end(),
                                [r](const PendingText& t) { return t.request == r; }),
                 pending_.end());
  ended_.push_back(Ended{it->second->job.sink, std::move(result)});
  requests_.erase(it);
  UpdateCount();
}

void Embeddings::RunBatch(Clock::time_point now) {
  // The oldest text's model; texts of other models wait for their own batch.
  const engine::EmbeddingModel* model = pending_.front().request->model.get();
  std::vector<size_t> candidates;  // positions in pending_, oldest first
  std::vector<int64_t> lengths;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i].request->model.get() != model) continue;
    candidates.push_back(i);
    lengths.push_back(static_cast<int64_t>(pending_[i].ids.size()));
  }
  const std::vector<size_t> plan = PlanBatch(lengths, policy_.limits);
  std::vector<size_t> members;  // positions in pending_, ascending
  std::vector<std::vector<int32_t>> ids;
  std::vector<int64_t> batch_lengths;
  for (const size_t k : plan) {
    members.push_back(candidates[k]);
    // Moved: the batch's texts leave pending_ after the pass, whatever
    // its outcome.
    ids.push_back(std::move(pending_[candidates[k]].ids));
    batch_lengths.push_back(lengths[k]);
  }
  EmbedBatchStats stats;
  stats.texts = static_cast<int>(members.size());
  for (const int64_t n : batch_lengths)
    stats.tokens += n;
  stats.padding = PaddingFraction(batch_lengths);
  stats.forming_s = MsBetween(pending_[members.front()].arrived, now) / 1000;
  const auto t0 = Clock::now();
  in_flight_ = 1;
  auto vectors = engine::Embed(*model, ids, /*normalize=*/false);
  in_flight_ = 0;
  const auto t1 = Clock::now();
  stats.inference_s = MsBetween(t0, t1) / 1000;
  batches_.push_back(stats);
  report_sink_ = pending_[members.front()].request->job.sink;

  std::vector<std::string> finished;
  std::vector<std::string> failed;
  for (size_t j = 0; j < members.size(); ++j) {
    PendingText& t = pending_[members[j]];
    Request& r = *t.request;
    if (!r.first_batch) r.first_batch = t0;
    if (!vectors.ok()) {
      if (std::find(failed.begin(), failed.end(), r.job.id) == failed.end()) {
        failed.push_back(r.job.id);
      }
      continue;
    }
    r.result.embeddings[t.index] = Finish(std::move((*vectors)[j]), r.dims, r.normalize);
    if (--r.remaining == 0) finished.push_back(r.job.id);
  }
  // Requests with texts in this batch count its pass once each.
  std::vector<Request*> counted;
  for (const size_t pos : members) {
    Request* r = pending_[pos].request;
    if (std::find(counted.begin(), counted.end(), r) != counted.end()) continue;
    counted.push_back(r);
    r->embed_ms += MsBetween(t0, t1);
  }
  for (auto it = members.rbegin(); it != members.rend(); ++it)
    pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(*it));
  UpdateCount();
  if (!vectors.ok()) {
    spdlog::warn("embedding batch of {} text(s) failed: {}", members.size(),
                 vectors.error().message);
    for (const std::string& id : failed)
      End(id, vectors.error());
  }
  for (const std::string& id : finished) {
    Request& r = *requests_.at(id);
    EmbedResult result = std::move(r.result);
    result.timings.load_ms = r.load_ms;
    result.timings.batch_wait_ms = MsBetween(r.admitted, r.first_batch.value_or(r.admitted));
    result.timings.embed_ms = r.embed_ms;
    End(id, std::move(result));
  }
}

void Embeddings::Step(Clock::time_point now, bool flush) {
  EndCancelled();
  if (!pending_.empty() && (flush || now >= NextDue())) RunBatch(now);
  Report();
}

void Embeddings::FailAll(const Error& error) {
  std::vector<std::string> ids;
  for (const auto& [id, r] : requests_)
    ids.push_back(id);
  for (const std::string& id : ids)
    End(id, error);
  Report();
}

void Embeddings::Report() {
  if (ended_.empty() && batches_.empty() && !load_) return;
  const bool cleaned = policy_.cleanup_after_each && requests_.empty() && !others_busy_();
  if (cleaned) ReleaseCachedMemory();
  WorkerReport report = MakeReport(models_, /*measure=*/true);
  report.cleaned_up = cleaned;
  // The batches' figures and the load go with one report only.
  WorkerReport first = report;
  first.embed_batches.swap(batches_);
  first.model_load = load_;
  load_.reset();
  std::vector<Ended> ended;
  ended.swap(ended_);
  if (ended.empty()) {
    if (report_sink_.report) report_sink_.report(std::move(first));
    return;
  }
  for (size_t i = 0; i < ended.size(); ++i) {
    ended[i].sink.done(std::move(ended[i].result), i == 0 ? std::move(first) : report);
  }
}

}  // namespace medq::daemon
