#include "daemon/engine/decode_step.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "daemon/engine/kernels/aligned_vector.h"
#include "daemon/engine/kernels/cpu_activation.h"
#include "daemon/engine/kernels/cpu_attention.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/quantized_embeddings.h"

namespace medq::engine {
namespace {

std::atomic<bool> g_enabled{true};

const float* F32(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<float>() : nullptr;
}

bool IsMatVecWeight(const at::Tensor& w, at::ScalarType dtype) {
  return w.defined() && w.dim() == 2 && w.scalar_type() == dtype && w.is_contiguous();
}

// transformers' LlamaRMSNorm in float32: out = x / sqrt(mean(x²) + eps) · w.
// The sum of squares is taken in double (LibTorch's float sum rounds
// differently; both are within float32 rounding of the exact value).
void RmsNorm(const float* x, int64_t n, const float* w, double eps, float* out) {
  double squares = 0.0;
  for (int64_t i = 0; i < n; ++i)
    squares += static_cast<double>(x[i]) * x[i];
  const float r = 1.0f / std::sqrt(static_cast<float>(squares / static_cast<double>(n)) +
                                   static_cast<float>(eps));
  for (int64_t i = 0; i < n; ++i)
    out[i] = x[i] * r * w[i];
}

// transformers' apply_rotary_pos_emb on one head: x·cos + rotate_half(x)·sin,
// rotate_half(x) = (-x[half:], x[:half]).
void Rope(float* x, int64_t d, const float* cos, const float* sin) {
  const int64_t half = d / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    x[i] = a * cos[i] - b * sin[i];
    x[i + half] = b * cos[i + half] + a * sin[i + half];
  }
}

// y [m, out] = x [m, in] · wᵀ + bias through the packed copy of w where the
// model holds one (packed_weights.h), the row-major matrix otherwise: either
// way row i of y is bitwise what it would be alone.
// int8 weights take their row scales and int4 ones (uint8) their group
// parameters (quantize.h), which are otherwise undefined.
void Product(const at::Tensor& w, const at::Tensor& packed, const float* x, int64_t m,
             const float* bias, float* y, const at::Tensor& scale = at::Tensor()) {
  const auto* p = packed.defined()
                      ? reinterpret_cast<const uint16_t*>(packed.data_ptr<at::BFloat16>())
                      : nullptr;
  kernels::WeightRowsInto(w, scale, p, x, m, bias, y);
}

// The per-step activations of n rows, row-major [n, width], sized once per
// step, each on a cache line (the kernels read x from them).
struct Buffers {
  Buffers(const ModelConfig& c, int64_t intermediate, int64_t n)
      : rows(n),
        x(n * c.hidden_size),
        h(n * c.hidden_size),
        qkv(n * (c.num_heads + 2 * c.num_kv_heads) * c.head_dim),
        attn(n * c.num_heads * c.head_dim),
        gate_up(n * 2 * intermediate),
        act(n * intermediate) {
    attention.reserve(static_cast<size_t>(n));
  }
  int64_t rows;
  kernels::AlignedFloats x, h, qkv, attn, gate_up, act;
  std::vector<kernels::CachedAttention> attention;  // a layer's, one per row
};

// The residual connection: x += h.
void AddResidual(Buffers& b) {
  for (size_t i = 0; i < b.x.size(); ++i)
    b.x[i] += b.h[i];
}

// RMSNorm of every row of b.x into b.h.
void NormRows(const ModelConfig& c, const at::Tensor& weight, Buffers& b) {
  for (int64_t i = 0; i < b.rows; ++i) {
    RmsNorm(b.x.data() + i * c.hidden_size, c.hidden_size, F32(weight), c.rms_norm_eps,
            b.h.data() + i * c.hidden_size);
  }
}

// q/k norms, RoPE at the cache's position and the key/value write of one
// sequence, qkv [q_out + 2 * kv_out]; returns its attention, to run once the
// batch's caches all hold their new position, into out [heads * D].
kernels::CachedAttention PrepareAttention(const ModelConfig& c, const LayerWeights& l, size_t layer,
                                          KvCache& cache, float* qkv, float* out) {
  const int64_t d = c.head_dim, p = cache.length();
  float* q = qkv;
  float* k = q + c.num_heads * d;
  const float* v = k + c.num_kv_heads * d;
  const float* cos = F32(cache.cos()) + p * d;
  const float* sin = F32(cache.sin()) + p * d;
  for (int64_t i = 0; i < c.num_heads; ++i) {
    if (c.qk_norm) RmsNorm(q + i * d, d, F32(l.q_norm), c.rms_norm_eps, q + i * d);
    Rope(q + i * d, d, cos, sin);
  }
  float* keys = cache.keys(layer).data_ptr<float>();
  float* values = cache.values(layer).data_ptr<float>();
  const int64_t capacity = cache.capacity();
  for (int64_t g = 0; g < c.num_kv_heads; ++g) {
    if (c.qk_norm) RmsNorm(k + g * d, d, F32(l.k_norm), c.rms_norm_eps, k + g * d);
    Rope(k + g * d, d, cos, sin);
    std::memcpy(keys + (g * capacity + p) * d, k + g * d, static_cast<size_t>(d) * sizeof(float));
    std::memcpy(values + (g * capacity + p) * d, v + g * d, static_cast<size_t>(d) * sizeof(float));
  }
  kernels::CachedAttention a;
  a.q = q;
  a.keys = keys;
  a.values = values;
  a.heads = c.num_heads;
  a.kv_heads = c.num_kv_heads;
  a.capacity = capacity;
  a.head_dim = d;
  // PlanAttention's rule: position p sees k <= p with p - k < window.
  a.begin = c.sliding_window ? std::max<int64_t>(0, p - *c.sliding_window + 1) : 0;
  a.end = p + 1;
  a.out = out;
  return a;
}

// x += o_proj(attention(h)): one projection call per weight for all rows,
// attention per sequence against its own cache, the heads of all of them shared
// over the kernels' threads in one call.
void AttentionBlock(const ModelConfig& c, const LayerWeights& l, size_t layer,
                    std::span<KvCache* const> caches, Buffers& b) {
  const int64_t qkv_width = (c.num_heads + 2 * c.num_kv_heads) * c.head_dim;
  const int64_t attn_width = c.num_heads * c.head_dim;
  Product(l.qkv_proj, l.qkv_packed, b.h.data(), b.rows, F32(l.qkv_bias), b.qkv.data(), l.qkv_scale);
  b.attention.clear();
  for (int64_t i = 0; i < b.rows; ++i) {
    b.attention.push_back(PrepareAttention(c, l, layer, *caches[static_cast<size_t>(i)],
                                           b.qkv.data() + i * qkv_width,
                                           b.attn.data() + i * attn_width));
  }
  kernels::CpuCachedAttention(b.attention);
  Product(l.o_proj, l.o_packed, b.attn.data(), b.rows, F32(l.o_bias), b.h.data(), l.o_scale);
  AddResidual(b);
}

// x += down_proj(silu(gate) · up) over h.
void MlpBlock(const LayerWeights& l, Buffers& b) {
  Product(l.gate_up_proj, l.gate_up_packed, b.h.data(), b.rows, F32(l.gate_up_bias),
          b.gate_up.data(), l.gate_up_scale);
  const int64_t inter = l.gate_up_proj.size(0) / 2;
  for (int64_t i = 0; i < b.rows; ++i) {
    const float* gate = b.gate_up.data() + i * 2 * inter;
    kernels::SiluMul(gate, gate + inter, inter, b.act.data() + i * inter);
  }
  Product(l.down_proj, l.down_packed, b.act.data(), b.rows, F32(l.down_bias), b.h.data(),
          l.down_scale);
  AddResidual(b);
}

}  // namespace

bool CpuDecodeRowsApply(const Model& m) {
  if (!g_enabled.load(std::memory_order_relaxed)) return false;
  if (!m.device.is_cpu() || m.compute_dtype != at::kFloat || at::GradMode::is_enabled()) {
    return false;
  }
  if (m.weight_dtype != at::kFloat && m.weight_dtype != at::kBFloat16) return false;
  if (m.weights.layers.empty()) return false;
  const at::ScalarType w = m.weight_dtype;
  // The projections: int8 with their float32 scales, int4 (uint8) with their
  // bf16 group parameters, or the weight dtype.
  const Quantization q = m.quantization;
  const at::ScalarType p = q == Quantization::kInt8   ? at::kChar
                           : q == Quantization::kInt4 ? at::kByte
                                                      : w;
  const at::ScalarType scale_dtype = q == Quantization::kInt4 ? at::kBFloat16 : at::kFloat;
  const auto fits = [&](const at::Tensor& matrix, const at::Tensor& scale) {
    return IsMatVecWeight(matrix, p) &&
           (q == Quantization::kNone ||
            (scale.defined() && scale.is_contiguous() && scale.scalar_type() == scale_dtype));
  };
  // The embeddings and lm_head: quantized as the projections
  // (quantized_embeddings.h), or in the weight dtype.
  const auto vocab_fits = [&](const at::Tensor& matrix, const at::Tensor& scale) {
    return scale.defined() ? fits(matrix, scale) : IsMatVecWeight(matrix, w);
  };
  if (!vocab_fits(m.weights.embed, m.weights.embed_scale) ||
      !vocab_fits(m.weights.lm_head, m.weights.lm_head_scale)) {
    return false;
  }
  return std::all_of(m.weights.layers.begin(), m.weights.layers.end(), [&](const LayerWeights& l) {
    return fits(l.qkv_proj, l.qkv_scale) && fits(l.o_proj, l.o_scale) &&
           fits(l.gate_up_proj, l.gate_up_scale) && fits(l.down_proj, l.down_scale);
  });
}

bool CpuDecodeStepApplies(const Model& m, const KvCache& cache) {
  return cache.batch() == 1 && CpuDecodeRowsApply(m);
}

at::Tensor CpuDecodeRows(const Model& m, std::span<const int64_t> ids,
                         std::span<KvCache* const> caches) {
  const ModelConfig& c = m.config;
  const auto n = static_cast<int64_t>(ids.size());
  Buffers b(c, m.weights.layers[0].gate_up_proj.size(0) / 2, n);
  for (int64_t i = 0; i < n; ++i)
    EmbeddingRowInto(m.weights.embed, m.weights.embed_scale, ids[static_cast<size_t>(i)],
                     b.x.data() + i * c.hidden_size);
  for (size_t i = 0; i < m.weights.layers.size(); ++i) {
    const LayerWeights& l = m.weights.layers[i];
    NormRows(c, l.input_norm, b);
    AttentionBlock(c, l, i, caches, b);
    NormRows(c, l.post_norm, b);
    MlpBlock(l, b);
  }
  NormRows(c, m.weights.norm, b);
  at::Tensor logits = at::empty({n, m.weights.lm_head.size(0)}, at::kFloat);
  Product(m.weights.lm_head, m.weights.lm_head_packed, b.h.data(), n, nullptr,
          logits.data_ptr<float>(), m.weights.lm_head_scale);
  return logits;
}

at::Tensor CpuDecodeStep(const Model& m, int64_t id, KvCache& cache) {
  KvCache* const one[] = {&cache};
  const int64_t ids[] = {id};
  return CpuDecodeRows(m, ids, one).view({1, 1, -1});
}

void SetCpuDecodeStepEnabled(bool enabled) {
  g_enabled.store(enabled, std::memory_order_relaxed);
}

}  // namespace medq::engine
