#include "daemon/engine/static_rows.h"

#include <cstdint>

#include "daemon/engine/fused_ops.h"
#include "daemon/engine/layers.h"
#include "daemon/engine/quantized_embeddings.h"

namespace medq::engine {
namespace {

int64_t Address(const at::Tensor& t) {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(t.data_ptr()));
}

void CopyIn(const std::vector<int64_t>& values, at::Tensor& to) {
  to.copy_(at::tensor(values, at::kLong).view(to.sizes()));
}

}  // namespace

StaticStepInputs AllocateStepInputs(const Model& m, int64_t rows) {
  const auto opts = at::TensorOptions().dtype(at::kLong).device(m.device);
  const auto layers = static_cast<int64_t>(m.weights.layers.size());
  StaticStepInputs in;
  in.ids = at::zeros({rows}, opts);
  in.positions = at::zeros({rows}, opts);
  in.advance = at::zeros({rows}, opts);
  in.capacities = at::zeros({rows}, opts);
  in.tables = at::zeros({2 * layers + 2, rows}, opts);
  return in;
}

RowBinding BindingOf(const Model& m, std::span<KvCache* const> caches, size_t sequences) {
  const size_t rows = caches.size(), layers = m.weights.layers.size();
  RowBinding b;
  b.tables.assign((2 * layers + 2) * rows, 0);
  for (size_t i = 0; i < rows; ++i) {
    KvCache& c = *caches[i];
    for (size_t l = 0; l < layers; ++l) {
      b.tables[l * rows + i] = Address(c.keys(l));
      b.tables[(layers + l) * rows + i] = Address(c.values(l));
    }
    b.tables[2 * layers * rows + i] = Address(c.cos());
    b.tables[(2 * layers + 1) * rows + i] = Address(c.sin());
    b.capacities.push_back(c.capacity());
    b.advance.push_back(i < sequences ? 1 : 0);
    b.positions.push_back(c.length());
  }
  return b;
}

void Upload(const RowBinding& b, bool rows_too, StaticStepInputs& in) {
  if (rows_too) {
    CopyIn(b.tables, in.tables);
    CopyIn(b.capacities, in.capacities);
    CopyIn(b.advance, in.advance);
  }
  CopyIn(b.positions, in.positions);
}

at::Tensor StaticRows(const Model& m, const StaticStepInputs& in,
                      std::span<KvCache* const> caches) {
  const ModelConfig& c = m.config;
  const auto n = static_cast<int64_t>(caches.size());
  at::Tensor x = EmbedTokens(m, in.ids.view({n, 1}));
  for (size_t layer = 0; layer < m.weights.layers.size(); ++layer) {
    const LayerWeights& l = m.weights.layers[layer];
    const at::Tensor qkv = DecodeNormLinear(m, x, l.input_norm, c.rms_norm_eps, l.qkv_proj,
                                            l.qkv_bias, l.qkv_scale);  // [N, 1, q_out + 2 * kv_out]
    const at::Tensor q = RopeCacheWrite(m, l, layer, qkv, in, caches);
    DecodeLinearAddInto(m, x, DecodeAttention(m, layer, q, in, caches), l.o_proj, l.o_bias,
                        l.o_scale);
    // MlpBlock's arithmetic, through the decode projections.
    const at::Tensor gate_up = DecodeNormLinear(m, x, l.post_norm, c.rms_norm_eps, l.gate_up_proj,
                                                l.gate_up_bias, l.gate_up_scale);
    DecodeSiluLinearAddInto(m, x, gate_up, l.down_proj, l.down_bias, l.down_scale);
  }
  return DecodeNormLinear(m, x, m.weights.norm, c.rms_norm_eps, m.weights.lm_head, at::Tensor(),
                          m.weights.lm_head_scale)
      .to(at::kFloat)
      .view({n, -1});
}

}  // namespace medq::engine
