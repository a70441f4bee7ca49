// Where each row of a batched decode step reads and writes (internal), in a
// header of its own without CUDA's: the CPU emulation of the attention
// kernels (tests/kernels/cuda_emulation.h) builds tables too.
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

}  // namespace medq::engine::cuda
