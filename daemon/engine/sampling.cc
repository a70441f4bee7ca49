#include "daemon/engine/sampling.h"

#include <cmath>
#include <limits>

#include "daemon/engine/argmax.h"

namespace medq::engine {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

Error Bad(const std::string& field, const std::string& rule) {
  return Error(ErrorCode::kInvalidRequest, "sampling." + field + " must be " + rule);
}

// transformers' RepetitionPenaltyLogitsProcessor.
at::Tensor Penalize(const at::Tensor& logits, const std::vector<int32_t>& history, float penalty) {
  if (penalty == 1.0f || history.empty()) return logits;
  const at::Tensor ids = at::tensor(std::vector<int64_t>(history.begin(), history.end()), at::kLong)
                             .to(logits.device());
  const at::Tensor picked = logits.gather(0, ids);
  const at::Tensor changed = at::where(picked < 0, picked * penalty, picked / penalty);
  return logits.scatter(0, ids, changed);
}

}  // namespace

Status ValidateSampling(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0) return Bad("temperature", ">= 0");
  if (p.top_k < 0) return Bad("top_k", ">= 0 (0 = off)");
  if (!std::isfinite(p.top_p) || p.top_p <= 0 || p.top_p > 1) return Bad("top_p", "in (0, 1]");
  if (!std::isfinite(p.min_p) || p.min_p < 0 || p.min_p > 1) return Bad("min_p", "in [0, 1]");
  if (!std::isfinite(p.repetition_penalty) || p.repetition_penalty <= 0) {
    return Bad("repetition_penalty", "> 0 (1 = off)");
  }
  return Status::Ok();
}

Sampler::Sampler(const SamplingParams& params) : params_(params) {
  if (params.seed.has_value()) {
    rng_.seed(*params.seed);
  } else {
    std::random_device rd;
    rng_.seed((static_cast<uint64_t>(rd()) << 32) ^ rd());
  }
}

at::Tensor Sampler::Warp(const at::Tensor& logits, const std::vector<int32_t>& history) const {
  at::Tensor s = Penalize(logits.to(at::kFloat), history, params_.repetition_penalty)
                     .to(at::kCPU)
                     .contiguous();
  if (params_.temperature == 0) return s;
  return WarpScores(s);
}

at::Tensor Sampler::WarpScores(at::Tensor s) const {
  s = s / params_.temperature;
  const int64_t vocab = s.size(0);
  if (params_.top_k > 0 && params_.top_k < vocab) {
    // TopKLogitsWarper: drop scores below the k-th largest.
    const at::Tensor kth = std::get<0>(s.topk(params_.top_k)).index({params_.top_k - 1});
    s = s.masked_fill(s < kth, kNegInf);
  }
  if (params_.top_p < 1.0f) {
    // TopPLogitsWarper: ascending sort, drop the tokens whose cumulative
    // probability stays <= 1 - top_p, always keeping the most likely one.
    const auto [sorted, order] = s.sort(0, false);
    const at::Tensor cum = sorted.softmax(0).cumsum(0);
    at::Tensor remove_sorted = cum <= (1.0f - params_.top_p);
    remove_sorted.index_put_({vocab - 1}, false);
    const at::Tensor remove = remove_sorted.scatter(0, order, remove_sorted);
    s = s.masked_fill(remove, kNegInf);
  }
  if (params_.min_p > 0) {
    // MinPLogitsWarper: drop tokens whose probability is below min_p times the
    // top probability (the top token always survives).
    const at::Tensor probs = s.softmax(0);
    const at::Tensor threshold = probs.max() * params_.min_p;
    s = s.masked_fill(probs < threshold, kNegInf);
  }
  return s;
}

bool Sampler::PicksArgmax() const {
  return params_.temperature == 0 && params_.repetition_penalty == 1.0f;
}

void Sampler::StartOnDevice(const std::vector<int32_t>& prompt, int64_t vocab, at::Device device) {
  if (params_.repetition_penalty == 1.0f) return;
  seen_ = at::zeros({vocab}, at::TensorOptions().dtype(at::kBool).device(device));
  if (prompt.empty()) return;
  const at::Tensor ids =
      at::tensor(std::vector<int64_t>(prompt.begin(), prompt.end()), at::kLong).to(device);
  seen_.index_fill_(0, ids, true);
}

void Sampler::Observe(const at::Tensor& id) {
  if (seen_.defined()) seen_.index_fill_(0, id.view({1}), true);
}

at::Tensor Sampler::NextOnDevice(const at::Tensor& logits) {
  at::Tensor s = logits.to(at::kFloat);
  if (seen_.defined()) {
    // transformers' penalty: each id seen once or more is scaled once.
    const float p = params_.repetition_penalty;
    s = at::where(seen_, at::where(s < 0, s * p, s / p), s);
  }
  if (params_.temperature == 0) return s.argmax();
  const at::Tensor cum = WarpScores(s).softmax(0).to(at::kDouble).cumsum(0);
  // Next()'s draw: u in [0, total), the first id whose running sum passes u
  // (ids of zero probability never do). The uniform comes from the same
  // generator in the same way, scaled by the total on the device.
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
  return cum.le(cum[-1] * u).sum().clamp_max_(cum.size(0) - 1);
}

int32_t Sampler::Next(const at::Tensor& logits, const std::vector<int32_t>& history) {
  if (params_.temperature == 0) {
    const at::Tensor s = params_.repetition_penalty == 1.0f
                             ? logits
                             : Penalize(logits.to(at::kFloat), history, params_.repetition_penalty);
    return static_cast<int32_t>(Argmax(s));
  }
  const at::Tensor probs = Warp(logits, history).softmax(0).to(at::kDouble).contiguous();
  const double* p = probs.data_ptr<double>();
  const int64_t n = probs.size(0);
  double total = 0;
  for (int64_t i = 0; i < n; ++i)
    total += p[i];
  const double u = std::uniform_real_distribution<double>(0.0, total)(rng_);
  double acc = 0;
  int64_t last_positive = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (p[i] <= 0) continue;
    last_positive = i;
    acc += p[i];
    if (u < acc) return static_cast<int32_t>(i);
  }
  return static_cast<int32_t>(last_positive);
}

}  // namespace medq::engine
