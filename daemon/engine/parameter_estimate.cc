#include "daemon/engine/parameter_estimate.h"

#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine {

int64_t MatrixBytes(int64_t out, int64_t in, const WeightLayout& layout, bool quantized) {
  if (quantized && layout.quantize == "int8") return out * in + 4 * out;
  if (quantized && layout.quantize == "int4") {
    return out * in / 2 + 4 * out * (in / layout.quantize_group);
  }
  return out * in * layout.matrix_element_bytes;
}

int64_t EstimateParameterBytes(const ModelConfig& c, const WeightLayout& layout) {
  const bool quantized = layout.quantize == "int8" || layout.quantize == "int4";
  const bool vocab_quantized = quantized && layout.quantize_embeddings;
  const bool packed = layout.packed && !quantized;
  const int64_t h = c.hidden_size, d = c.head_dim, inter = c.intermediate_size;
  const int64_t q_out = c.num_heads * d, kv_out = c.num_kv_heads * d;
  const int64_t v = layout.vector_element_bytes;
  // A projection and, when packed, its copy in tiles of 16 rows (bf16).
  const auto projection = [&](int64_t out, int64_t in) {
    int64_t bytes = MatrixBytes(out, in, layout, quantized);
    if (packed) bytes += kernels::PackedTiles(out) * kernels::kPackedTileRows * in * 2;
    return bytes;
  };

  int64_t total = MatrixBytes(c.vocab_size, h, layout, vocab_quantized) + h * v;  // embed, norm
  if (!c.tie_word_embeddings ||
      (layout.gpu_layout && vocab_quantized && layout.quantize == "int4")) {
    total += MatrixBytes(c.vocab_size, h, layout, vocab_quantized);
  }
  if (packed) total += kernels::PackedTiles(c.vocab_size) * kernels::kPackedTileRows * h * 2;

  int64_t layer = projection(q_out + 2 * kv_out, h) + projection(h, q_out) +
                  projection(2 * inter, h) + projection(h, inter) + 2 * h * v;
  if (c.qkv_bias) layer += (q_out + 2 * kv_out) * v;
  if (c.o_bias) layer += h * v;
  if (c.mlp_bias) layer += (2 * inter + h) * v;
  if (c.qk_norm) layer += 2 * d * v;
  return total + c.num_layers * layer;
}

}  // namespace medq::engine
