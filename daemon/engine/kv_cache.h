// The per-sequence state of a run: keys and values of every layer, allocated
// once for prompt + max new tokens and written in place, plus the RoPE tables
// for the same positions.
#pragma once

#include <ATen/ATen.h>

#include <vector>

#include "daemon/engine/model.h"

namespace medq::engine {

class KvCache {
 public:
  // Allocates [batch, kv_heads, capacity, head_dim] per layer for keys and
  // values in the model's compute dtype on its device, filled with zeros
  // when `zeroed` (the device loop's static step reads every slot:
  // static_rows.h), else left as allocated. Throws c10::Error (out of
  // memory) like any LibTorch allocation.
  KvCache(const Model& model, int64_t batch, int64_t capacity, bool zeroed = false);

  int64_t length() const { return length_; }  // positions filled
  int64_t capacity() const { return capacity_; }
  int64_t batch() const { return batch_; }
  // Keys/values of `layer` for positions [0, length()+added).
  at::Tensor& keys(size_t layer) { return keys_[layer]; }
  at::Tensor& values(size_t layer) { return values_[layer]; }
  const at::Tensor& cos() const { return cos_; }
  const at::Tensor& sin() const { return sin_; }
  void Advance(int64_t n) { length_ += n; }

 private:
  std::vector<at::Tensor> keys_, values_;
  at::Tensor cos_, sin_;
  int64_t length_ = 0;
  int64_t capacity_ = 0;
  int64_t batch_ = 0;
};

}  // namespace medq::engine
