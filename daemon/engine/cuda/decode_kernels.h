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

#include "daemon/engine/cuda/decode_types.h"

namespace medq::engine::cuda {

enum class ElementType { kFloat, kBFloat16, kHalf };

// The rows of the q/k/v projection, qkv [rows, heads * D | kv_heads * D |
// kv_heads * D]: each q and k head RMS-normed over D (when q_norm/k_norm
// are given: the q/k norms of Qwen3) and rotated with row r's
// cos/sin[position], the q heads written to q_out [rows, heads * D], the k
// heads and the v heads (as they are) into row r's caches at its position.
// D even, at most 1024.
cudaError_t RopeCacheWrite(const void* qkv, const RowTables& rows_at, const void* q_norm,
                           const void* k_norm, float eps, void* q_out, int rows, int heads,
                           int kv_heads, int head_dim, ElementType type, cudaStream_t stream);

// One query position a row against that row's cache: out [rows, heads * D]
// = softmax(q · kᵀ / sqrt(D)) · v over the keys at positions begin ..
// position (begin = position - window + 1 when window > 0, else 0), query
// head h reading kv head h / (heads / kv_heads). q [rows, heads * D].
// Softmax in float32.
//
// splits 1: one block a query head and row walks every key. splits > 1
// (flash-decoding, for long contexts): the keys are cut into `splits`
// chunks of at least 32 keys, each walked by a block of its own (its warps
// with several keys' loads in flight), and a second launch merges the
// chunks' online softmaxes; chunks past the last key do nothing, so one
// launch shape (a CUDA graph's) serves every position. `workspace` holds
// DecodeAttentionWorkspace(...) floats for it. Results equal splits 1's up
// to float32 rounding (the sums are grouped otherwise).
constexpr int kMaxAttentionSplits = 64;
cudaError_t DecodeAttention(const void* q, const RowTables& rows_at, void* out, int rows, int heads,
                            int kv_heads, int head_dim, int64_t window, ElementType type,
                            cudaStream_t stream, int splits = 1, float* workspace = nullptr);

// The float32 scratch DecodeAttention needs for `splits` (0 for one split).
int64_t DecodeAttentionWorkspace(int rows, int heads, int head_dim, int splits);

// The splits that give a device of `multiprocessors` SMs some two blocks an
// SM for `rows` rows of `heads` query heads: the smallest power of two that
// does, at most kMaxAttentionSplits (1 when the rows alone do). A host
// function: no device is touched.
int DecodeAttentionSplits(int rows, int heads, int multiprocessors);

// y [m, n] = in(x) [m, k] · wᵀ (w [n, k], row-major) + bias [n] (when given) +
// residual [m, n] (when given; y may be residual itself, for an in-place
// add). m from 1 to 16: each weight row is read once for all m rows, by one
// warp, in 16-byte loads, and summed in float32. x's and w's rows must start
// on 16 bytes (k a multiple of 16 bytes' worth of elements, pointers so
// aligned): GemvApplies says whether they do. `norm` ([k]) and `eps` serve
// kRmsNorm only.
bool GemvApplies(const void* x, const void* w, int64_t m, int64_t k, ElementType type);
cudaError_t Gemv(const void* x, const void* w, const void* bias, const void* residual, void* y,
                 int64_t m, int64_t n, int64_t k, ElementType type, cudaStream_t stream,
                 GemvInput input = GemvInput::kPlain, const void* norm = nullptr, float eps = 0.0f);

// out [rows, inter] = silu(gate) * up for gate_up [rows, 2 * inter] (gate the
// first half of each row, up the second).
cudaError_t SiluMul(const void* gate_up, void* out, int64_t rows, int64_t inter, ElementType type,
                    cudaStream_t stream);

}  // namespace medq::engine::cuda
