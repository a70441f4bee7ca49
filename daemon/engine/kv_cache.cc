#include "daemon/engine/kv_cache.h"

#include "daemon/engine/rope.h"

namespace medq::engine {

KvCache::KvCache(const Model& model, int64_t batch, int64_t capacity, bool zeroed)
    : capacity_(capacity), batch_(batch) {
  const ModelConfig& c = model.config;
  // One allocation for all layers; per-layer tensors are views into it.
  const auto options = at::TensorOptions().dtype(model.compute_dtype).device(model.device);
  const std::vector<int64_t> shape = {c.num_layers, 2, batch, c.num_kv_heads, capacity, c.head_dim};
  const at::Tensor all = zeroed ? at::zeros(shape, options) : at::empty(shape, options);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    keys_.push_back(all[l][0]);
    values_.push_back(all[l][1]);
  }
  RopeTables(model.inv_freq, capacity, model.device, model.compute_dtype, &cos_, &sin_);
}

}  // namespace medq::engine
