// Choosing the next token from logits with transformers' semantics and order:
// repetition penalty (over prompt + generated ids), then temperature, top_k,
// top_p, min_p, then a draw from the softmax (or argmax when greedy).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <random>
#include <vector>

#include "common/result.h"
#include "daemon/engine/engine.h"

namespace medq::engine {

// kInvalidRequest naming the field when a value is out of range
// (temperature < 0, top_k < 0, top_p not in (0, 1], min_p not in [0, 1],
// repetition_penalty <= 0, or any of them not finite).
Status ValidateSampling(const SamplingParams& params);

class Sampler {
 public:
  // Precondition: ValidateSampling(params) is ok. Without a seed the draws are
  // seeded from std::random_device.
  explicit Sampler(const SamplingParams& params);

  // logits: [vocab] float32 on any device. history: prompt + generated ids.
  // The random draw runs on the CPU, so a seed gives the same tokens whatever
  // the device (as long as the logits are the same).
  int32_t Next(const at::Tensor& logits, const std::vector<int32_t>& history);

  // Whether Next() and NextOnDevice() are the argmax of the logits as they
  // are: greedy without a repetition penalty. Such rows may be chosen
  // together, by one argmax over all of them.
  bool PicksArgmax() const;

  // The warped scores before the draw (-inf = excluded), float32 on CPU; for
  // tests. Greedy params leave the scores after the penalty unchanged.
  at::Tensor Warp(const at::Tensor& logits, const std::vector<int32_t>& history) const;

  // The same choice without leaving the logits' device (what CUDA runs): the
  // penalty from a device mask of the ids seen so far, the warpers as tensor
  // ops, and the draw by inverse CDF on the device against a uniform drawn
  // here from the same seeded generator, so that a seed gives the tokens
  // Next() gives (up to float rounding at a boundary). Nothing is copied to
  // the host: the id comes back as a 0-dim int64 tensor on the device, for
  // the next step's input and one small copy for the caller.
  // StartOnDevice records the prompt (one upload); Observe adds each token.
  void StartOnDevice(const std::vector<int32_t>& prompt, int64_t vocab, at::Device device);
  at::Tensor NextOnDevice(const at::Tensor& logits);
  void Observe(const at::Tensor& id);

 private:
  // The warpers (temperature, top_k, top_p, min_p) on scores of any device.
  at::Tensor WarpScores(at::Tensor s) const;

  SamplingParams params_;
  std::mt19937_64 rng_;
  at::Tensor seen_;  // [vocab] bool on the device: ids the penalty applies to
};

}  // namespace medq::engine
