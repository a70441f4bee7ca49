// Internal to medq_kernels: the raw dense kernels behind Linear(), one table
// per instruction set. Nothing outside this folder includes this header.
//
// All kernels take row-major, contiguous buffers, accumulate in float32, and
// write the output rows [row_begin, row_end) only, so that callers can split
// the output rows across threads. bf16 values are passed as their raw 16-bit
// patterns (the upper half of a float32). The caller guarantees the sizes: no
// kernel checks its arguments.
#pragma once

#include <cstdint>

namespace medq::engine::kernels {

// y[r] = dot(w[r, 0:in], x) + (bias ? bias[r] : 0), for r in [row_begin, row_end).
// w is [out, in] float32.
using MatVecF32Fn = void (*)(const float* w, int64_t in, const float* x, const float* bias,
                             float* y, int64_t row_begin, int64_t row_end);

// Same with w [out, in] bf16, and x as laid out by the same table's
// prepare_bf16_rows with m = 1 (once per product, not per row range).
using MatVecBf16Fn = void (*)(const uint16_t* w, int64_t in, const float* x, const float* bias,
                              float* y, int64_t row_begin, int64_t row_end);

// Writes the m rows x [m, in] into `prepared` [m, in] in the order the same
// table's bf16 kernels read them: matvec_bf16 for m = 1, matrows_bf16 for m
// rows (the layout may depend on m, as the tiles that run do). Once per
// product, not per row range.
using PrepareBf16RowsFn = void (*)(const float* x, int64_t m, int64_t in, float* prepared);

// Several input rows against bf16 weights: for every i in [0, m) and
// r in [row_begin, row_end), y[i, r] = dot(w[r, :], x[i, :]) + bias[r].
// x is [m, in], y is [m, out]. Each weight row is read from memory once per
// call, whatever m is. scratch holds kBf16RowBlock * in floats, owned by the
// caller and used by this call only (one per thread).
using MatMulBf16Fn = void (*)(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                              const float* bias, float* y, int64_t row_begin, int64_t row_end,
                              float* scratch);

// Several input rows, each computed exactly as the same table's matvec
// computes one: for every i in [0, m) and r in [row_begin, row_end),
// y[i * out + r] holds, bitwise, what matvec_f32 / matvec_bf16 writes to
// y[r] for x row i (bf16: the rows laid out by prepare_bf16_rows for m).
// Each weight row is read from memory once for all m rows and reused from L1
// while the rows run against it, so m rows cost about one weight read, and a
// row's result never depends on m or on the other rows (batch invariance).
// x is [m, in], y is [m, out].
using MatRowsF32Fn = void (*)(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                              const float* bias, float* y, int64_t row_begin, int64_t row_end);
using MatRowsBf16Fn = void (*)(const uint16_t* w, int64_t in, int64_t out, const float* x,
                               int64_t m, const float* bias, float* y, int64_t row_begin,
                               int64_t row_end);

// bf16 weights packed in tiles of kPackedTileRows rows (PackBf16Tiles in
// cpu_linear.h): tile t holds rows [16t, 16t + 16) of w [out, in], column k
// of the tile at packed[(t * in + k) * 16 + p], where position p = 2j holds
// row 16t + j and p = 2j + 1 row 16t + 8 + j (j < 8), rows past `out` zero.
// For every i in [0, m) and row r of the tiles [tile_begin, tile_end) below
// out: y[i * out + r] = Σ_k w[r, k] · x[i, k] + bias[r], the sum one fused
// multiply-add at a time in k order from 0, in every table and for any m,
// so that a row's result never depends on m or the other rows (batch
// invariance) and the tables agree bitwise. x is [m, in] as it is, y is
// [m, out]. Each tile is read from memory once for all m rows.
inline constexpr int64_t kPackedTileRows = 16;
// The tiles of an [out, in] matrix, and where row j of a tile sits in one of
// its columns.
inline constexpr int64_t PackedTiles(int64_t out) {
  return (out + kPackedTileRows - 1) / kPackedTileRows;
}
inline constexpr int64_t PackedTilePosition(int64_t j) {
  return j < 8 ? 2 * j : 2 * (j - 8) + 1;
}
using PackedBf16Fn = void (*)(const uint16_t* packed, int64_t in, int64_t out, const float* x,
                              int64_t m, const float* bias, float* y, int64_t tile_begin,
                              int64_t tile_end);

// dst[i] = float(src[i]) for i in [0, n): bf16 to float32, exact.
using Bf16ToF32Fn = void (*)(const uint16_t* src, int64_t n, float* dst);

// y[0:d] = Σ_{s in [0, n)} p[s] · w[s, 0:d]: a vector times a matrix (the
// weighted sum of its rows), w [n, d] float32, summed in order of s for every
// column. Attention's probabilities times its cached values.
using VecMatF32Fn = void (*)(const float* p, const float* w, int64_t n, int64_t d, float* y);

// out[j] = silu(gate[j]) · up[j] = gate[j] / (1 + exp(-gate[j])) · up[j] for
// j in [0, n): the gated MLP's activation. The scalar table takes std::exp;
// the SIMD tables a polynomial exp within a few float32 ulps of it, so the
// tables agree to about 1e-6 relative, not bitwise (every row of a step runs
// the same table, so batch invariance holds).
using SiluMulF32Fn = void (*)(const float* gate, const float* up, int64_t n, float* out);

// scores[s] = dot(keys[s, 0:d], q) / scale for s in [0, n): one query head
// against n cached keys, rows of [n, d]. Attention's q · kᵀ / √d.
using ScoresF32Fn = void (*)(const float* keys, int64_t n, int64_t d, const float* q, float scale,
                             float* scores);

// p[s] = exp(p[s] - max) / Σ_t exp(p[t] - max) for s in [0, n), in place,
// with max the largest p: the softmax of attention's scores. The scalar
// table takes std::exp, the SIMD ones the polynomial exp of silu_mul_f32.
using SoftmaxF32Fn = void (*)(float* p, int64_t n);

// int8 weights, one float32 scale per output row (symmetric weight-only
// quantization: w[r, k] ≈ q[r, k] · scale[r], q in [-127, 127]; -128 is
// read too), row-major. Like the int4 products (below), they read x rounded
// to int8 in blocks of 32 values, each block's d and xq as PrepareI4Rows
// makes them, so that a product is integer multiply-adds. With one weight
// scale a row, the blocks of x need not be contiguous, so they are laid out
// for the kernels: x lies in spans of 512 values (8 chunks of 64), and lane
// l of a span, its block l, is the values at 512S + 64c + 4l + u for chunks
// c < 8 and u < 4 (those below in: the last span's blocks may be shorter).
// A lane then sums a whole block, 8 vpdpbusd, before one convert and one
// FMA. PrepareI8Rows writes, for each x row:
// - q: xq[k] at k, zeros to a multiple of 64;
// - lane_scale: 16 floats a span, lane l = d of block l (0 for an empty
//   block);
// - offset: 16 int32 a span, lane l = -128 · Σ xq of block l: what a kernel
//   that reads the weights as unsigned bytes q + 128 (VNNI's vpdpbusd takes
//   unsigned times signed) starts the lane's sum from.
// For r in [row_begin, row_end): 16 float32 lanes A (from 0) take, span by
// span, lane l:
//   P = Σ_{c < 8, u < 4} q[r, k] · xq[k], k = 512S + 64c + 4l + u < in
//   (int32, exact),
//   A_l = fma(float(P), lane_scale_l, A_l);
// A's halves [0, 8) + [8, 16), and those eight lanes as HorizontalSum
// (avx2_common.h) folds them: dot; y[r] = fma(dot, scale[r], bias[r]) with
// a bias, dot · scale[r] without. Every table computes exactly this, so the
// tables agree bitwise with the scalar reference.
inline constexpr int64_t kInt8Chunk = 64;
inline constexpr int64_t kInt8Span = 512;
// Sizes of one x row's prepared buffers (PrepareI8Rows), in elements.
inline constexpr int64_t I8RowBytes(int64_t in) {
  return (in + kInt8Chunk - 1) / kInt8Chunk * kInt8Chunk;
}
inline constexpr int64_t I8RowLanes(int64_t in) {
  return (in + kInt8Span - 1) / kInt8Span * 16;
}
// x rows as PrepareI8Rows wrote them: row i's buffers start at q + i *
// I8RowBytes(in), lane_scale + i * I8RowLanes(in) and offset + i *
// I8RowLanes(in).
struct I8Rows {
  const int8_t* q;
  const float* lane_scale;
  const int32_t* offset;
  int64_t in;
};
// One x row (row 0 of x) against the rows [row_begin, row_end) of w.
using MatVecI8Fn = void (*)(const int8_t* w, const float* scale, const I8Rows& x, const float* bias,
                            float* y, int64_t row_begin, int64_t row_end);

// Several x rows against int8 weights: y[i * out + r] holds, bitwise, what
// matvec_i8 writes to y[r] for x row i, whatever m and the other rows are
// (batch invariance); each weight row is read from memory once for all m.
// y is [m, out].
using MatRowsI8Fn = void (*)(const int8_t* w, const float* scale, const I8Rows& x, int64_t out,
                             int64_t m, const float* bias, float* y, int64_t row_begin,
                             int64_t row_end);

// dst[r, k] = float(q[r, k]) · scale[r] for the rows [0, rows) of q [rows,
// in]: the int8 weights dequantized to float32 (one rounding a weight), for
// a quantized embedding row looked up (quantized_embeddings.h in the engine).
using DequantizeI8Fn = void (*)(const int8_t* q, const float* scale, int64_t rows, int64_t in,
                                float* dst);

// int4 weights in groups of `group` weights along the input (asymmetric
// weight-only quantization, quantize.h in the engine). A row of w [out, in]
// is in / 2 bytes of blocks of 32 weights: byte j = 4t + u (t, u < 4) of
// block b, its word t, holds weight 32b + j in its low nibble and 32b + 16 +
// j in its high one. The blocks lie in spans of 16 (512 weights, 256 bytes;
// the last span holds the n = (in / 32) % 16 blocks left, if any), and a
// span of n >= 8 blocks (16 for a whole one) interleaves them by words:
// word t of its block l is bytes 4n·t + 4l .. + 4 of the span, so quarter t
// is word t of every block, one 32-bit lane a block, and a lane sums a whole
// block in integers before it is scaled once (the x rows line up with it,
// below). A last span of n < 8 blocks keeps them plain, block l at bytes
// 16l .. + 16, read in chunks of four blocks, lane 4i + t = word t of the
// chunk's block i: a short span's lanes would stand mostly empty.
// Int4WordAt gives a word's place, Int4PlaceOf a weight's; cpu_linear.h's
// PackInt4Row writes the layout. params [out, in / group, 2] holds bf16 bit
// patterns: each group's scale s and minimum m. A weight dequantizes to w[k]
// = fma(float(q[k]), s, m) (one rounding), 0 <= q <= 15. in is a multiple
// of 32 and of group, and group is 32, 64 or 128 (so a span and a chunk hold
// whole groups).
//
// The products (matvec_i4, matrows_i4) read x quantized to int8 in blocks of
// 32, as llama.cpp's Q4 kernels read its Q8 activations, so that a product
// is integer multiply-adds (VNNI's vpdpbusd, AVX2's vpmaddubsw): four to
// eight times the weights a cycle of float32 FMAs, which four sequences'
// rows need (bench/engine/README.md). PrepareI4Rows writes, for each x row:
// - per block b of x[32b .. 32b + 32): amax = max |x|; d = amax / 127 and
//   xq[k] = round-to-nearest-even(x[k] · (127 / amax)) in [-127, 127] (d = 0
//   and xq = 0 where amax < 1e-30; d = NaN and xq = 0 where a value is not
//   finite, so that a NaN or an infinity still poisons the product);
// - q: xq in spans of 512 bytes (16 blocks), each value beside the weight it
//   multiplies: in a span of n >= 8 blocks (of the weights' layout), byte
//   128t + 4l + u holds xq[32b + 4t + u] of the span's block l and byte
//   128t + 64 + 4l + u holds xq[32b + 16 + 4t + u], the partners of the low
//   and high nibbles of its word t; in a span of n < 8, byte 128c + 16i + j
//   holds xq[32b + j] and byte 128c + 64 + 16i + j holds xq[32b + 16 + j]
//   for block l = 4c + i (chunk c); zeros elsewhere, to a whole span;
// - lane_scale: 16 floats a span, lane l = d of the span's block l (0 past
//   in);
// - group_sum: per weight group g, S_g = Σ_{blocks b of g, in order}
//   fma(d_b, float(Σ xq of b), S) from S = 0, i.e. Σ x as quantized; zeros
//   to a multiple of 16.
// For r in [row_begin, row_end): 16 float32 lanes A (from 0) take, span by
// span, each block b = 16c + l of span c (present if 32b < in) with its
// group's scale s_b and its d_b = lane_scale_l:
// - in a span of n >= 8 blocks, lane l:
//     P = Σ_{j < 32} q[32b + j] · xq[32b + j]   (int32, exact),
//     A_l = fma(float(P), s_b · d_b, A_l)   (s_b · d_b one rounding);
// - in a span of n < 8, chunk by chunk, for block l = 4c + i and t < 4,
//   lane L = 4i + t:
//     P = Σ_{u < 4} q[32b + 4t + u] · xq[32b + 4t + u]
//         + q[32b + 16 + 4t + u] · xq[32b + 16 + 4t + u],
//     A_L = fma(float(P), s_b · d_b, A_L);
// then the same lanes take the minimums, A_{g % 16} = fma(m_g, S_g,
// A_{g % 16}) for the groups g in order; A's halves [0, 8) + [8, 16), and
// those eight lanes as HorizontalSum (avx2_common.h) folds them: dot.
// y[r] = dot + bias[r] with a bias, dot without. Every table computes
// exactly this (integer sums are exact in any order), so the tables agree
// bitwise with the scalar reference; the product is that of the dequantized
// weights with x as quantized, to float32 rounding.
inline constexpr int64_t kInt4Block = 32;
inline constexpr int64_t kInt4SpanBlocks = 16;
inline constexpr int64_t kInt4SpanWeightBytes = 256;  // of a weight row: 16 blocks
inline constexpr int64_t kInt4SpanBytes = 512;        // of prepared x: 16 blocks
// The fewest blocks a span interleaves; shorter ones are plain.
inline constexpr int64_t kInt4InterleavedBlocks = 8;
// The blocks of span `span` of a row of `blocks` blocks.
inline constexpr int64_t Int4SpanLength(int64_t blocks, int64_t span) {
  const int64_t left = blocks - span * kInt4SpanBlocks;
  return left < kInt4SpanBlocks ? left : kInt4SpanBlocks;
}
// The byte at which word t of block l of a span of n blocks starts, from the
// span's start (byte 256 · its index).
inline constexpr int64_t Int4WordAt(int64_t n, int64_t l, int64_t t) {
  return n >= kInt4InterleavedBlocks ? 4 * n * t + 4 * l : 16 * l + 4 * t;
}
// Where weight k of an int4 row `in` wide lies: its byte, and the shift of
// its nibble (0 low, 4 high).
struct Int4Place {
  int64_t byte;
  int shift;
};
inline constexpr Int4Place Int4PlaceOf(int64_t in, int64_t k) {
  const int64_t b = k / kInt4Block, span = b / kInt4SpanBlocks, j = k % 16;
  const int64_t n = Int4SpanLength(in / kInt4Block, span);
  return {span * kInt4SpanWeightBytes + Int4WordAt(n, b % kInt4SpanBlocks, j / 4) + j % 4,
          k % kInt4Block < 16 ? 0 : 4};
}
// Sizes of one x row's prepared buffers (PrepareI4Rows), in elements.
inline constexpr int64_t I4RowSpans(int64_t in) {
  return (in / kInt4Block + kInt4SpanBlocks - 1) / kInt4SpanBlocks;
}
inline constexpr int64_t I4RowBytes(int64_t in) {
  return I4RowSpans(in) * kInt4SpanBytes;
}
inline constexpr int64_t I4RowLaneScales(int64_t in) {
  return I4RowSpans(in) * 16;
}
inline constexpr int64_t I4RowGroupSums(int64_t in, int64_t group) {
  return (in / group + 15) / 16 * 16;
}
// x rows as PrepareI4Rows wrote them: row i's buffers start at q + i *
// I4RowBytes(in), lane_scale + i * I4RowLaneScales(in) and group_sum + i *
// I4RowGroupSums(in, group).
struct I4Rows {
  const int8_t* q;
  const float* lane_scale;
  const float* group_sum;
  int64_t in;
  int64_t group;
};
// One block of x, n <= 32 values, rounded as above: xq[t] to lo[t] for t <
// 16 and to hi[t - 16] for 16 <= t < n (zeros may be written to the
// positions of t in [n, 32)); d to *d; returns Σ xq. Nothing is written for
// a block whose d is 0 or NaN (its xq are 0). The one per-table piece of the
// preparation: PrepareI8Rows and PrepareI4Rows lay the blocks out.
using QuantizeXBlockFn = int32_t (*)(const float* x, int64_t n, int8_t* lo, int8_t* hi, float* d);

// One span of x for the int8 products, n <= 512 values at x, rounded as
// above: xq[k] to q[k] for k < n and zeros to a multiple of 64, block l's d
// to d[l] and -128 · Σ xq to offset[l] (l < 16; empty blocks d = 0). The
// int8 products' per-table piece of the preparation (a whole span in
// registers); QuantizeXSpanWith is the generic one, any table's
// quantize_x_block a block at a time (prepare_x.cc).
using QuantizeXSpanFn = void (*)(const float* x, int64_t n, int8_t* q, float* d, int32_t* offset);
void QuantizeXSpanWith(QuantizeXBlockFn quantize, const float* x, int64_t n, int8_t* q, float* d,
                       int32_t* offset);

// x [m, in] laid out for the int8 and for the int4 products, with a table's
// quantize_x_span and quantize_x_block (prepare_x.cc): once a product, not
// per row range.
void PrepareI8Rows(QuantizeXSpanFn quantize, const float* x, int64_t m, int64_t in, int8_t* q,
                   float* lane_scale, int32_t* offset);
void PrepareI4Rows(QuantizeXBlockFn quantize, const float* x, int64_t m, int64_t in, int64_t group,
                   int8_t* q, float* lane_scale, float* group_sum);
// One x row (row 0 of x) against the rows [row_begin, row_end) of w.
using MatVecI4Fn = void (*)(const uint8_t* w, const uint16_t* params, const I4Rows& x,
                            const float* bias, float* y, int64_t row_begin, int64_t row_end);

// Several x rows against int4 weights: y[i * out + r] holds, bitwise, what
// matvec_i4 writes to y[r] for x row i, whatever m and the other rows are
// (batch invariance); each weight row is read from memory and unpacked
// once for all m. y is [m, out].
using MatRowsI4Fn = void (*)(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t out,
                             int64_t m, const float* bias, float* y, int64_t row_begin,
                             int64_t row_end);

// dst[r, k] = fma(float(q[r, k]), s, m) for the rows [0, rows) of w and
// params as above: the int4 weights dequantized to float32, bitwise what the
// kernels multiply by, for a quantized embedding row looked up and for
// Linear()'s baseline path (DequantizeInt4).
using DequantizeI4Fn = void (*)(const uint8_t* w, const uint16_t* params, int64_t rows, int64_t in,
                                int64_t group, float* dst);

struct DenseKernels {
  const char* name;
  MatVecF32Fn matvec_f32;
  MatVecBf16Fn matvec_bf16;
  PrepareBf16RowsFn prepare_bf16_rows;
  MatMulBf16Fn matmul_bf16;
  Bf16ToF32Fn bf16_to_f32;
  MatRowsF32Fn matrows_f32;
  MatRowsBf16Fn matrows_bf16;
  PackedBf16Fn packed_bf16;
  VecMatF32Fn vecmat_f32;
  SiluMulF32Fn silu_mul_f32;
  ScoresF32Fn scores_f32;
  SoftmaxF32Fn softmax_f32;
  QuantizeXBlockFn quantize_x_block;
  QuantizeXSpanFn quantize_x_span;
  MatVecI8Fn matvec_i8;
  MatRowsI8Fn matrows_i8;
  DequantizeI8Fn dequantize_i8;
  MatVecI4Fn matvec_i4;
  MatRowsI4Fn matrows_i4;
  DequantizeI4Fn dequantize_i4;
};

// The portable kernels; run on every x86-64 (and any other) CPU.
const DenseKernels& ScalarKernels();

// The AVX2+FMA kernels (dense_kernels_avx2.cc, the only file built with
// -mavx2 -mfma). Precondition: the CPU supports AVX2 and FMA; calling one of
// these kernels on another CPU is an illegal instruction.
const DenseKernels& Avx2FmaKernels();

// The AVX2+FMA table with the matrows entries of AVX-512, whose 512-bit
// accumulators and 32 vector registers hold larger tiles
// (dense_kernels_rows_avx512.cc), and the matvecs those tiles compute
// bitwise (four sums a dot product, where the AVX2 table's keep two); every
// other entry is the AVX2+FMA table's. The two tables' products agree to
// float32 rounding, not bitwise. Precondition: the CPU supports AVX2, FMA,
// AVX-512F and AVX-512VL.
const DenseKernels& Avx512VlKernels();

// The AVX2+FMA table's matrows entries and its matvecs, which compute each
// row as the matrows entries do (dense_kernels_rows_avx2.cc, built with
// -mavx2 -mfma); same precondition as Avx2FmaKernels().
void MatVecF32Avx2(const float* w, int64_t in, const float* x, const float* bias, float* y,
                   int64_t row_begin, int64_t row_end);
void MatVecBf16Avx2(const uint16_t* w, int64_t in, const float* x, const float* bias, float* y,
                    int64_t row_begin, int64_t row_end);
void MatRowsF32Avx2(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                    const float* bias, float* y, int64_t row_begin, int64_t row_end);
void MatRowsBf16Avx2(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                     const float* bias, float* y, int64_t row_begin, int64_t row_end);

// The AVX2+FMA table's packed_bf16 (packed_avx2.cc, built with -mavx2
// -mfma), which the AVX-512VL table shares; same precondition.
void PackedBf16Avx2(const uint16_t* packed, int64_t in, int64_t out, const float* x, int64_t m,
                    const float* bias, float* y, int64_t tile_begin, int64_t tile_end);

// The AVX2+FMA table's silu_mul_f32 (activations_avx2.cc, built with -mavx2
// -mfma), which the AVX-512VL table shares; same precondition.
void SiluMulAvx2(const float* gate, const float* up, int64_t n, float* out);

// The AVX2+FMA table's scores_f32 and softmax_f32 (attention_avx2.cc, built
// with -mavx2 -mfma), which the AVX-512VL table shares; same precondition.
void ScoresF32Avx2(const float* keys, int64_t n, int64_t d, const float* q, float scale,
                   float* scores);
void SoftmaxF32Avx2(float* p, int64_t n);

// The AVX-512VL table's matrows entries (dense_kernels_rows_avx512.cc, built
// with -mavx512f -mavx512vl too: tiles of two weight rows and up to four x
// rows in 512-bit registers); same precondition as Avx512VlKernels().
void MatRowsF32Avx512(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                      const float* bias, float* y, int64_t row_begin, int64_t row_end);
void MatRowsBf16Avx512(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                       const float* bias, float* y, int64_t row_begin, int64_t row_end);
// The AVX-512VL table's prepare_bf16_rows: the AVX2 table's layout where
// MatRowsBf16Avx512 runs the one-row tiles (m <= 2), its own elsewhere.
void PrepareBf16RowsAvx512(const float* x, int64_t m, int64_t in, float* prepared);

// The AVX2+FMA table's int8 entries (int8_avx2.cc, built with -mavx2 -mfma:
// vpsignb, vpmaddubsw and vpmaddwd for the integer sums), of which the
// AVX-512VL table shares dequantize_i8; same precondition as
// Avx2FmaKernels(). Both tables' matvec_i8 and matrows_i8 take the VNNI
// kernels below where the CPU has them (and SetVnniKernelsEnabled allows).
void MatVecI8Avx2(const int8_t* w, const float* scale, const I8Rows& x, const float* bias, float* y,
                  int64_t row_begin, int64_t row_end);
void MatRowsI8Avx2(const int8_t* w, const float* scale, const I8Rows& x, int64_t out, int64_t m,
                   const float* bias, float* y, int64_t row_begin, int64_t row_end);
void DequantizeI8Avx2(const int8_t* q, const float* scale, int64_t rows, int64_t in, float* dst);
// With AVX-VNNI's 256-bit vpdpbusd (int8_avxvnni.cc, -mavxvnni too);
// precondition: CpuSupportsAvxVnni() (cpu_features.h).
void MatVecI8AvxVnni(const int8_t* w, const float* scale, const I8Rows& x, const float* bias,
                     float* y, int64_t row_begin, int64_t row_end);
void MatRowsI8AvxVnni(const int8_t* w, const float* scale, const I8Rows& x, int64_t out, int64_t m,
                      const float* bias, float* y, int64_t row_begin, int64_t row_end);
// With AVX-512 VNNI (int8_avx512.cc, -mavx512f -mavx512vl -mavx512bw
// -mavx512vnni too: a chunk of 64 weights a register); precondition:
// CpuSupportsAvx512Vnni().
void MatVecI8Vnni(const int8_t* w, const float* scale, const I8Rows& x, const float* bias, float* y,
                  int64_t row_begin, int64_t row_end);
void MatRowsI8Vnni(const int8_t* w, const float* scale, const I8Rows& x, int64_t out, int64_t m,
                   const float* bias, float* y, int64_t row_begin, int64_t row_end);

// The AVX2+FMA table's int4 entries (int4_avx2.cc, built with -mavx2
// -mfma: vpmaddubsw and vpmaddwd for the integer sums); same precondition as
// Avx2FmaKernels(). The AVX-512VL table shares dequantize_i4. Both tables'
// matvec_i4 and matrows_i4 take the VNNI kernels below where the CPU has
// them (and SetVnniKernelsEnabled allows), these where it has neither.
// Both tables' quantize_x_block and quantize_x_span (prepare_x_avx2.cc,
// -mavx2 -mfma).
int32_t QuantizeXBlockAvx2(const float* x, int64_t n, int8_t* lo, int8_t* hi, float* d);
void QuantizeXSpanAvx2(const float* x, int64_t n, int8_t* q, float* d, int32_t* offset);
void MatVecI4Avx2(const uint8_t* w, const uint16_t* params, const I4Rows& x, const float* bias,
                  float* y, int64_t row_begin, int64_t row_end);
void MatRowsI4Avx2(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t out,
                   int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end);
void DequantizeI4Avx2(const uint8_t* w, const uint16_t* params, int64_t rows, int64_t in,
                      int64_t group, float* dst);
// The AVX2 int4 products with AVX-VNNI's 256-bit vpdpbusd (int4_avxvnni.cc,
// built with -mavx2 -mfma -mavxvnni); bitwise the AVX2 kernels' results.
// Precondition: CpuSupportsAvxVnni() (cpu_features.h).
void MatVecI4AvxVnni(const uint8_t* w, const uint16_t* params, const I4Rows& x, const float* bias,
                     float* y, int64_t row_begin, int64_t row_end);
void MatRowsI4AvxVnni(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t out,
                      int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end);
// The int4 products with AVX-512 VNNI (int4_avx512.cc, built with
// -mavx512f -mavx512vl -mavx512vnni too: a chunk of 128 weights a register,
// two vpdpbusd an x row, tiles of up to four x rows); bitwise the AVX2
// kernels' results. Precondition: CpuSupportsAvx512Vnni() (cpu_features.h).
void MatVecI4Vnni(const uint8_t* w, const uint16_t* params, const I4Rows& x, const float* bias,
                  float* y, int64_t row_begin, int64_t row_end);
void MatRowsI4Vnni(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t out,
                   int64_t m, const float* bias, float* y, int64_t row_begin, int64_t row_end);

// Weight rows converted per step by MatMulBf16Fn kernels: a block of this many
// rows, converted to float32, is reused for every input row.
inline constexpr int64_t kBf16RowBlock = 4;

}  // namespace medq::engine::kernels
