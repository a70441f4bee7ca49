#include "daemon/engine/static_rows.h"

#include <vector>

#include "daemon/engine/fused_ops.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/layers.h"

namespace medq::engine {

at::Tensor StaticRows(const Model& m, const StaticStepInputs& in,
                      std::span<KvCache* const> caches) {
  const ModelConfig& c = m.config;
  const auto n = static_cast<int64_t>(caches.size());
  at::Tensor x = at::embedding(m.weights.embed, in.ids.view({n, 1})).to(m.compute_dtype);
  std::vector<at::Tensor> positions;
  for (int64_t i = 0; i < n; ++i)
    positions.push_back(in.positions.narrow(0, i, 1));
  std::vector<at::Tensor> out(static_cast<size_t>(n));
  for (size_t layer = 0; layer < m.weights.layers.size(); ++layer) {
    const LayerWeights& l = m.weights.layers[layer];
    const at::Tensor h = RmsNorm(x, l.input_norm, c.rms_norm_eps);
    const at::Tensor qkv =
        DecodeLinear(m, h, l.qkv_proj, l.qkv_bias, l.qkv_scale);  // [N, 1, q_out + 2 * kv_out]
    for (size_t i = 0; i < out.size(); ++i) {
      KvCache& cache = *caches[i];
      const at::Tensor row = n == 1 ? qkv : qkv.narrow(0, static_cast<int64_t>(i), 1);
      const at::Tensor q = RopeCacheWrite(m, l, layer, row, positions[i], in.cos, in.sin, cache);
      out[i] = DecodeAttention(m, layer, q, positions[i], cache);  // [1, 1, heads * D]
    }
    DecodeLinearAddInto(m, x, n == 1 ? out[0] : at::cat(out, 0), l.o_proj, l.o_bias, l.o_scale);
    // MlpBlock's arithmetic, through the decode projections.
    const at::Tensor gate_up = DecodeLinear(m, RmsNorm(x, l.post_norm, c.rms_norm_eps),
                                            l.gate_up_proj, l.gate_up_bias, l.gate_up_scale);
    DecodeLinearAddInto(m, x, SiluMul(gate_up, l.gate_up_proj.size(0) / 2), l.down_proj,
                        l.down_bias, l.down_scale);
  }
  x = RmsNorm(x, m.weights.norm, c.rms_norm_eps);
  return DecodeLinear(m, x, m.weights.lm_head, at::Tensor()).to(at::kFloat).view({n, -1});
}

}  // namespace medq::engine
