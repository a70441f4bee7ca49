#include "daemon/engine/quantized_embeddings.h"

#include <cstring>
#include <vector>

#include "daemon/engine/kernels/cpu_features.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/quantize.h"

namespace medq::engine {
namespace {

struct QuantizedVocabMatrix {
  at::Tensor values, scale;
};

QuantizedVocabMatrix QuantizeVocabMatrix(const at::Tensor& w, Quantization q, int64_t group) {
  if (q == Quantization::kInt4) {
    QuantizedGroups g = QuantizeRowsInt4(w, group);
    return {std::move(g.values), std::move(g.params)};
  }
  QuantizedRows r = QuantizeRowsInt8(w);
  return {std::move(r.values), std::move(r.scales)};
}

}  // namespace

void QuantizeEmbeddings(ModelWeights& w, Quantization q, int64_t group) {
  const bool tied = w.lm_head.is_same(w.embed);
  // Both new first, so that a failed allocation leaves w untouched.
  QuantizedVocabMatrix embed = QuantizeVocabMatrix(w.embed, q, group);
  QuantizedVocabMatrix lm_head = tied ? embed : QuantizeVocabMatrix(w.lm_head, q, group);
  w.embed = std::move(embed.values);
  w.embed_scale = std::move(embed.scale);
  w.lm_head = std::move(lm_head.values);
  w.lm_head_scale = std::move(lm_head.scale);
  if (tied) {
    w.lm_head = w.embed;
    w.lm_head_scale = w.embed_scale;
  }
  w.lm_head_packed = at::Tensor();  // a bf16 copy of the full-precision matrix
}

at::Tensor EmbedTokens(const Model& m, const at::Tensor& ids) {
  const at::Tensor& embed = m.weights.embed;
  const at::Tensor& scale = m.weights.embed_scale;
  const at::Tensor index = ids.to(embed.device(), at::kLong);
  if (!scale.defined()) return at::embedding(embed, index).to(m.compute_dtype);
  const at::Tensor flat = index.reshape({-1});
  const at::Tensor values = embed.index_select(0, flat);
  const at::Tensor params = scale.index_select(0, flat);
  const at::Tensor rows = embed.scalar_type() == at::kByte ? DequantizeRowsInt4(values, params)
                                                           : DequantizeRowsInt8(values, params);
  std::vector<int64_t> sizes = index.sizes().vec();
  sizes.push_back(rows.size(1));
  return rows.view(sizes).to(m.compute_dtype);
}

void EmbeddingRowInto(const at::Tensor& embed, const at::Tensor& scale, int64_t id, float* out) {
  const kernels::DenseKernels& k = kernels::ActiveKernels();
  switch (embed.scalar_type()) {
    case at::kByte: {  // int4: [vocab, hidden / 2], params [vocab, groups, 2]
      const int64_t in = 2 * embed.size(1), groups = scale.size(1);
      const auto* params = reinterpret_cast<const uint16_t*>(scale.data_ptr<at::BFloat16>());
      k.dequantize_i4(embed.data_ptr<uint8_t>() + id * (in / 2), params + id * groups * 2, 1, in,
                      in / groups, out);
      return;
    }
    case at::kChar: {
      const int64_t in = embed.size(1);
      k.dequantize_i8(embed.data_ptr<int8_t>() + id * in, scale.data_ptr<float>() + id, 1, in, out);
      return;
    }
    case at::kFloat: {
      const int64_t n = embed.size(1);
      std::memcpy(out, embed.data_ptr<float>() + id * n, static_cast<size_t>(n) * sizeof(float));
      return;
    }
    default: {
      const int64_t n = embed.size(1);
      const auto* rows = reinterpret_cast<const uint16_t*>(embed.data_ptr<at::BFloat16>());
      kernels::Bf16ToFloat(rows + id * n, n, out);
      return;
    }
  }
}

}  // namespace medq::engine
