// The layouts of the int8 and int4 products, written once for every table
// (dense_kernels.h): x's (PrepareI8Rows, PrepareI4Rows; each table brings
// only its quantize_x_span and quantize_x_block, and QuantizeXSpanWith
// makes a span of blocks) and the int4 weights' (PackInt4Row).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {

void QuantizeXSpanWith(QuantizeXBlockFn quantize, const float* x, int64_t n, int8_t* q, float* d,
                       int32_t* offset) {
  std::fill(q, q + (n + kInt8Chunk - 1) / kInt8Chunk * kInt8Chunk, int8_t{0});
  for (int64_t l = 0; l < 16; ++l) {
    // Block l: its values gathered in order (chunk by chunk, four bytes
    // each), rounded, and put back in place.
    float values[32];
    int64_t at[32], count = 0;
    for (int64_t c = 0; c < kInt8Span / kInt8Chunk; ++c) {
      for (int64_t u = 0; u < 4; ++u) {
        if (const int64_t k = c * kInt8Chunk + 4 * l + u; k < n) at[count++] = k;
      }
    }
    for (int64_t t = 0; t < count; ++t)
      values[t] = x[at[t]];
    int8_t xq[32] = {};
    d[l] = 0.0f;
    int32_t sum = 0;
    if (count > 0) sum = quantize(values, count, xq, xq + 16, &d[l]);
    for (int64_t t = 0; t < count; ++t)
      q[at[t]] = xq[t];
    offset[l] = -128 * sum;
  }
}

void PrepareI8Rows(QuantizeXSpanFn quantize, const float* x, int64_t m, int64_t in, int8_t* q,
                   float* lane_scale, int32_t* offset) {
  const int64_t row_bytes = I8RowBytes(in), lanes = I8RowLanes(in);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t span = 0; span * kInt8Span < in; ++span) {
      const int64_t k0 = span * kInt8Span;
      quantize(x + i * in + k0, std::min(kInt8Span, in - k0), q + i * row_bytes + k0,
               lane_scale + i * lanes + span * 16, offset + i * lanes + span * 16);
    }
  }
}

void PrepareI4Rows(QuantizeXBlockFn quantize, const float* x, int64_t m, int64_t in, int64_t group,
                   int8_t* q, float* lane_scale, float* group_sum) {
  const int64_t row_bytes = I4RowBytes(in), lanes = I4RowLaneScales(in);
  const int64_t sums = I4RowGroupSums(in, group);
  std::fill(q, q + m * row_bytes, int8_t{0});
  std::fill(lane_scale, lane_scale + m * lanes, 0.0f);
  std::fill(group_sum, group_sum + m * sums, 0.0f);
  const int64_t blocks = in / kInt4Block;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < blocks; ++b) {
      // The block's 32 values in order, then each beside its weight: word t
      // of each half to lane l of quarter t in an interleaved span, the
      // halves whole to chunk l / 4 in a plain one.
      int8_t lo[16] = {}, hi[16] = {};
      float d;
      const int32_t sum = quantize(x + i * in + b * kInt4Block, kInt4Block, lo, hi, &d);
      const int64_t span = b / kInt4SpanBlocks, l = b % kInt4SpanBlocks;
      int8_t* at = q + i * row_bytes + span * kInt4SpanBytes;
      if (Int4SpanLength(blocks, span) >= kInt4InterleavedBlocks) {
        for (int t = 0; t < 4; ++t) {
          std::memcpy(at + 128 * t + 4 * l, lo + 4 * t, 4);
          std::memcpy(at + 128 * t + 64 + 4 * l, hi + 4 * t, 4);
        }
      } else {
        std::memcpy(at + 128 * (l / 4) + 16 * (l % 4), lo, 16);
        std::memcpy(at + 128 * (l / 4) + 64 + 16 * (l % 4), hi, 16);
      }
      lane_scale[i * lanes + span * 16 + l] = d;
      float& s = group_sum[i * sums + b * kInt4Block / group];
      s = std::fma(d, static_cast<float>(sum), s);
    }
  }
}

void PackInt4Row(const uint8_t* codes, int64_t in, uint8_t* dst) {
  const int64_t blocks = in / kInt4Block;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t span = b / kInt4SpanBlocks, n = Int4SpanLength(blocks, span);
    uint8_t* at = dst + span * kInt4SpanWeightBytes;
    const uint8_t* c = codes + b * kInt4Block;
    for (int64_t j = 0; j < 16; ++j) {
      at[Int4WordAt(n, b % kInt4SpanBlocks, j / 4) + j % 4] =
          static_cast<uint8_t>(c[j] | c[16 + j] << 4);
    }
  }
}

std::vector<int64_t> Int4CodeOrder(int64_t in) {
  std::vector<int64_t> order(static_cast<size_t>(in));
  for (int64_t k = 0; k < in; ++k) {
    const Int4Place p = Int4PlaceOf(in, k);
    order[static_cast<size_t>(k)] = 2 * p.byte + (p.shift == 0 ? 0 : 1);
  }
  return order;
}

}  // namespace medq::engine::kernels
