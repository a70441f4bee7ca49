// Trains a LlamaForCausalLM from scratch on a token stream with LibTorch's
// autograd, through the engine's own forward pass (ForwardSequence), and saves
// it as a Hugging Face model directory. A developer tool: not part of medqd.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace medq::train {

struct ModelShape {
  int64_t vocab = 0;
  int64_t hidden = 256;
  int64_t layers = 4;
  int64_t heads = 8;
  int64_t kv_heads = 4;
  int64_t intermediate = 768;
  int64_t context = 256;  // max_position_embeddings; training windows are this long
  int32_t eos_id = 0;     // also BOS
};

// config.json for the shape (LlamaForCausalLM, tied embeddings, bf16).
nlohmann::json ConfigJson(const ModelShape& shape);

struct TrainOptions {
  int64_t steps = 1000;
  int64_t batch = 16;  // windows of shape.context + 1 tokens per step
  int64_t warmup_steps = 100;
  double lr = 2e-3;  // peak; cosine decay to lr * min_lr_ratio
  double min_lr_ratio = 0.1;
  double weight_decay = 0.1;  // matrices only, not norms
  double clip_norm = 1.0;
  uint64_t seed = 1;
  int64_t eval_every = 100;   // steps between validation passes
  int64_t eval_windows = 64;  // validation windows per pass (fixed, consecutive)
  int64_t save_every = 500;   // steps between saves of the model so far
  int threads = 0;            // LibTorch intra-op threads; 0: one per core
};

struct CurvePoint {
  int64_t step = 0;
  double train_loss = 0;       // mean over the steps since the last point
  double validation_loss = 0;  // nats per token
  double seconds = 0;          // since training started
};

struct TrainReport {
  std::vector<CurvePoint> curve;
  int64_t parameters = 0;
  int64_t tokens_seen = 0;
  double seconds = 0;
};

// Trains a new model of `shape` on `train` (windows drawn at seeded random
// offsets) and reports the loss on `validation` every eval_every steps (and at
// the end), calling on_eval with each point. Every save_every steps and at the end, writes
// config.json, generation_config.json and model.safetensors (bf16) into out_dir, and calls on_save
// with the report so far. Same seed, data, options and thread count: the same model. Failure:
// kInvalidRequest for a bad shape or data shorter than one window; kInternal for LibTorch or file
// errors.
Result<TrainReport> TrainModel(const ModelShape& shape, const TrainOptions& options,
                               const std::vector<int32_t>& train,
                               const std::vector<int32_t>& validation,
                               const std::filesystem::path& out_dir,
                               const std::function<void(const CurvePoint&)>& on_eval,
                               const std::function<void(const TrainReport&)>& on_save);

}  // namespace medq::train
