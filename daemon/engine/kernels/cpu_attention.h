// Attention of one new position over a float32 KV cache on the CPU, on raw
// buffers: the attention of the CPU decode step (daemon/engine/decode_step.h).
#pragma once

#include <cstdint>
#include <span>

namespace medq::engine::kernels {

struct CachedAttention {
  const float* q = nullptr;       // [heads, head_dim], RoPE applied
  const float* keys = nullptr;    // [kv_heads, capacity, head_dim]
  const float* values = nullptr;  // [kv_heads, capacity, head_dim]
  int64_t heads = 0, kv_heads = 0, capacity = 0, head_dim = 0;
  int64_t begin = 0, end = 0;  // cached positions attended: [begin, end), begin < end
  float* out = nullptr;        // [heads, head_dim]
};

// For every query head h (which reads kv head h / (heads / kv_heads), as
// transformers' repeat_kv does): softmax over positions [begin, end) of
// (q_h · k_s) / sqrt(head_dim) in float32, then out_h = Σ p_s · v_s.
// Heads are split over KernelThreads() threads when the cache read is large
// enough to pay for it. Preconditions: heads is a multiple of kv_heads,
// 0 <= begin < end <= capacity; buffers as sized above.
void CpuCachedAttention(const CachedAttention& a);

// CpuCachedAttention for each element of `rows` (the sequences of a batched
// step, each against its own cache): every head of every row is one piece of
// work, and the pieces are split over KernelThreads() threads when the rows'
// cache reads together are large enough, so that short contexts of several
// sequences no longer run on the calling thread alone. Each head's result is
// the one CpuCachedAttention writes. Preconditions: as CpuCachedAttention's,
// for each row; outputs do not overlap.
void CpuCachedAttentionRows(std::span<const CachedAttention> rows);

}  // namespace medq::engine::kernels
