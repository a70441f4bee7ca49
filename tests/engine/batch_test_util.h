// Helpers of the continuous-batch tests (batch_test.cc on the CPU, gpu_test.cc
// on a CUDA device): requests that join a Batch at given steps, and a driver
// that steps it until every one has finished.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/engine/batch.h"
#include "daemon/engine/generate.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {

inline GenerateRequest Request(const std::vector<int32_t>& prompt, int max_new_tokens) {
  GenerateRequest r;
  r.prompt = prompt;
  r.max_new_tokens = max_new_tokens;
  r.stop_ids = std::vector<int32_t>{};
  return r;
}

// A request that joins the batch before step `join` (0 = before the first).
struct Joining {
  int join = 0;
  GenerateRequest request;
};

struct Outcome {
  SequenceId id = 0;
  std::vector<int32_t> tokens;
  std::optional<GenerateResult> result;
};

// Runs the batch until every request has joined and finished; per request,
// its tokens and final result.
inline std::vector<Outcome> RunBatch(std::shared_ptr<const Model> model,
                                     const BatchOptions& options,
                                     const std::vector<Joining>& requests) {
  Batch batch(std::move(model), options);
  std::vector<Outcome> out(requests.size());
  std::map<SequenceId, size_t> index;
  for (int step = 0;; ++step) {
    for (size_t i = 0; i < requests.size(); ++i) {
      if (requests[i].join != step) continue;
      auto id = batch.Add(requests[i].request);
      REQUIRE(id.ok());
      out[i].id = *id;
      index[*id] = i;
    }
    const bool more_to_join = std::any_of(requests.begin(), requests.end(),
                                          [step](const Joining& j) { return j.join > step; });
    if (batch.empty() && !more_to_join) break;
    auto steps = batch.Step();
    REQUIRE(steps.ok());
    for (const SequenceStep& s : *steps) {
      Outcome& o = out[index.at(s.id)];
      if (s.has_token) o.tokens.push_back(s.token);
      if (s.finished) o.result = s.result;
    }
  }
  return out;
}

inline std::vector<int32_t> Ids(const std::map<std::string, at::Tensor>& ref,
                                const std::string& name) {
  return ToIds(ref.at(name));
}

// Four sequences of different lengths joining at different steps; the two
// reference prompts decode 24 tokens.
inline std::vector<Joining> MixedRequests(const std::map<std::string, at::Tensor>& ref) {
  const std::vector<int32_t> p1 = Ids(ref, "input_ids_prompt1");
  const std::vector<int32_t> p2 = Ids(ref, "input_ids_prompt2");
  std::vector<int32_t> p21 = p2;
  p21.insert(p21.end(), p1.begin(), p1.end());
  return {{0, Request(p1, 24)},
          {2, Request(p2, 24)},
          {1, Request(p21, 9)},
          {3, Request(std::vector<int32_t>(p1.begin(), p1.begin() + 3), 17)}};
}

// MixedRequests with seeded sampling: temperature, top_p and, every other
// sequence, a repetition penalty.
inline std::vector<Joining> SeededMixedRequests(const std::map<std::string, at::Tensor>& ref) {
  std::vector<Joining> requests = MixedRequests(ref);
  for (size_t i = 0; i < requests.size(); ++i) {
    SamplingParams& s = requests[i].request.sampling;
    s.temperature = 0.8f;
    s.top_p = 0.9f;
    s.repetition_penalty = i % 2 == 0 ? 1.0f : 1.3f;
    s.seed = 1000 + i;
  }
  return requests;
}

// The tokens Generate gives for `r` alone.
inline std::vector<int32_t> Generated(const Model& m, const GenerateRequest& r) {
  std::vector<int32_t> out;
  auto res = Generate(m, r, [&](int32_t id) {
    out.push_back(id);
    return true;
  });
  REQUIRE(res.ok());
  return out;
}

// Each outcome is its request run alone, to its full length.
inline void CheckEachAsAlone(const Model& m, const std::vector<Joining>& requests,
                             const std::vector<Outcome>& out) {
  for (size_t i = 0; i < requests.size(); ++i) {
    INFO("sequence " << i);
    CHECK(out[i].tokens == Generated(m, requests[i].request));
    CHECK(out[i].tokens.size() == static_cast<size_t>(requests[i].request.max_new_tokens));
  }
}

}  // namespace medq::engine::test
