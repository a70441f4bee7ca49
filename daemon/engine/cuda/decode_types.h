// The types the decode kernels and their launchers share (internal), in a
// header without CUDA's: the kernels' CPU emulation
// (tests/kernels/cuda_emulation.h) uses them too.
#pragma once

#include <cstdint>

namespace medq::engine::cuda {

// Where each row of a batched decode step reads and writes: device arrays
// of one entry a row, so that one launch serves every row and a CUDA graph
// can replay it after the rows' caches changed (only the arrays' contents
// do). keys[r] and values[r] hold the addresses of row r's cache of the
// layer ([kv_heads, capacity, D], element type T), cos[r] and sin[r] of its
// RoPE tables ([P, D], P > its position).
struct RowTables {
  const uint64_t* keys;
  const uint64_t* values;
  const uint64_t* cos;
  const uint64_t* sin;
  const int64_t* capacities;  // [rows]
  const int64_t* positions;   // [rows]: where row r writes, and its last key
};

// What the GEMV multiplies by w: x itself, x RMS-normed (x / sqrt(mean(x²) +
// eps) · norm, transformers' RMSNorm, computed in the same pass), or
// silu(gate) · up with x = [gate | up] ([m, 2k]).
enum class GemvInput { kPlain, kRmsNorm, kSiluMul };

}  // namespace medq::engine::cuda
