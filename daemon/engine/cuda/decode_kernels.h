// Fused CUDA kernels for the decode step (internal; built only against a
// CUDA LibTorch, by the CUDA toolkit scripts/setup-torch installs). Plain
// pointers and a stream: no LibTorch header, so nvcc compiles this folder
// quickly; engine/fused_ops.h is the LibTorch-facing side and holds the
// reference each kernel must equal (the LibTorch ops they replace).
//
// Each kernel computes in float32 and rounds once to the element type, where
// the LibTorch ops round after every op: results equal up to the element
// type's rounding. Every launcher is asynchronous on `stream`, reads the
// position from device memory (so that a CUDA graph can replay it) and
// returns the launch's error (cudaSuccess when it was queued).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace medq::engine::cuda {

enum class ElementType { kFloat, kBFloat16, kHalf };

// One sequence's row of the q/k/v projection, qkv [heads * D | kv_heads * D |
// kv_heads * D]: each q and k head RMS-normed over D (when q_norm/k_norm are
// given: the q/k norms of Qwen3) and rotated with cos/sin[position] (tables
// [P, D]), the q heads written to q_out [heads * D], the k heads and the v
// heads (as they are) into the caches at `position` (keys and values [kv_heads,
// capacity, D]). D even, at most 1024.
cudaError_t RopeCacheWrite(const void* qkv, const void* cos, const void* sin, const void* q_norm,
                           const void* k_norm, float eps, const int64_t* position, void* q_out,
                           void* keys, void* values, int heads, int kv_heads, int head_dim,
                           int64_t capacity, ElementType type, cudaStream_t stream);

// One query position against one sequence's cache: out [heads * D] =
// softmax(q · kᵀ / sqrt(D)) · v over the keys at positions begin .. position
// (begin = position - window + 1 when window > 0, else 0), query head h
// reading kv head h / (heads / kv_heads). Softmax in float32.
cudaError_t DecodeAttention(const void* q, const void* keys, const void* values,
                            const int64_t* position, void* out, int heads, int kv_heads,
                            int head_dim, int64_t capacity, int64_t window, ElementType type,
                            cudaStream_t stream);

// y [m, n] = x [m, k] · wᵀ (w [n, k], row-major) + bias [n] (when given) +
// residual [m, n] (when given; y may be residual itself, for an in-place
// add). m from 1 to 8: each weight row is read once for all m rows, by one
// warp, in 16-byte loads, and summed in float32. x's and w's rows must start
// on 16 bytes (k a multiple of 16 bytes' worth of elements, pointers so
// aligned): GemvApplies says whether they do.
bool GemvApplies(const void* x, const void* w, int64_t m, int64_t k, ElementType type);
cudaError_t Gemv(const void* x, const void* w, const void* bias, const void* residual, void* y,
                 int64_t m, int64_t n, int64_t k, ElementType type, cudaStream_t stream);

// out [rows, inter] = silu(gate) * up for gate_up [rows, 2 * inter] (gate the
// first half of each row, up the second).
cudaError_t SiluMul(const void* gate_up, void* out, int64_t rows, int64_t inter, ElementType type,
                    cudaStream_t stream);

}  // namespace medq::engine::cuda
