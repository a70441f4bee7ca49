// The BERT and MPNet encoders on LibTorch tensors (internal): their weights
// read from a checkpoint, and the forward pass over a padded batch, as
// transformers' BertModel / MPNetModel compute it (eval mode).
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/engine/checkpoint.h"
#include "daemon/engine/encoder_config.h"

namespace medq::engine {

struct EncoderLayerWeights {
  at::Tensor qkv, qkv_bias;  // [3H, H], [3H]: query, key, value stacked
  at::Tensor out, out_bias;  // attention output projection
  at::Tensor attn_norm, attn_norm_bias;
  at::Tensor up, up_bias;  // intermediate dense
  at::Tensor down, down_bias;
  at::Tensor out_norm, out_norm_bias;
};

struct EncoderWeights {
  at::Tensor word;        // [V, H]
  at::Tensor position;    // [max_position_embeddings, H]
  at::Tensor token_type;  // BERT: [type_vocab_size, H]
  at::Tensor embed_norm, embed_norm_bias;
  at::Tensor relative_bias;  // MPNet: [buckets, heads]
  std::vector<EncoderLayerWeights> layers;
};

// Takes the encoder's tensors out of `tensors` (names with or without the
// "bert." / "mpnet." prefix) onto `device` in `dtype` (LayerNorm parameters
// too). The pooler and position-id buffers are ignored, as sentence-
// transformers ignores them. Failure: kInvalidRequest naming the tensor (and
// file): missing, wrong shape, not floating point, or unexpected.
Result<EncoderWeights> BuildEncoderWeights(const EncoderConfig& config,
                                           std::map<std::string, CheckpointTensor> tensors,
                                           at::Device device, at::ScalarType dtype);

// Bytes of the weights held.
int64_t EncoderParameterBytes(const EncoderWeights& weights);

// The last hidden state [B, T, H] (in the weights' dtype) of `ids` [B, T]
// (int64, on the weights' device) under `mask` [B, T] (1 real, 0 padding;
// real tokens first in every row, at least one per row).
at::Tensor EncoderForward(const EncoderConfig& config, const EncoderWeights& weights,
                          const at::Tensor& ids, const at::Tensor& mask);

// MPNet's relative position buckets [T, T] for a sequence of T (transformers'
// MPNetEncoder.relative_position_bucket with 32 buckets, max distance 128).
at::Tensor MpnetRelativeBuckets(int64_t length, at::Device device);

}  // namespace medq::engine
