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

// For each element of `rows` (one sequence against its own cache; a batched
// step passes all of its sequences) and every query head h of it (which reads
// kv head h / (heads / kv_heads), as transformers' repeat_kv does): softmax
// over positions [begin, end) of (q_h · k_s) / sqrt(head_dim) in float32,
// then out_h = Σ p_s · v_s. The heads are split over KernelThreads()
// threads when the rows' cache reads together are large enough to pay for
// it, so that several sequences' short contexts do not run on the calling
// thread alone: a kv head's query heads together where that balances, else
// each head on its own. A head's result does not depend on the other rows,
// the split or the thread count. Preconditions, for each row: heads is a
// multiple of kv_heads, 0 <= begin < end <= capacity, buffers as sized
// above; outputs do not overlap.
void CpuCachedAttention(std::span<const CachedAttention> rows);

}  // namespace medq::engine::kernels
