// x laid out for the int8 and int4 products (dense_kernels.h, PrepareI8Rows
// and PrepareI4Rows): the layout once, for every table; each table brings
// only its quantize_x_block.
#include <algorithm>
#include <cmath>

#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {

void PrepareI8Rows(QuantizeXBlockFn quantize, const float* x, int64_t m, int64_t in, int8_t* q,
                   float* lane_scale) {
  const int64_t row_bytes = I8RowBytes(in), lanes = I8RowLaneScales(in);
  std::fill(q, q + m * row_bytes, int8_t{0});
  std::fill(lane_scale, lane_scale + m * lanes, 0.0f);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b * kInt4Block < in; ++b) {
      int8_t* block = q + i * row_bytes + b * kInt4Block;
      float d;
      quantize(x + i * in + b * kInt4Block, std::min(kInt4Block, in - b * kInt4Block), block,
               block + 16, &d);
      std::fill_n(lane_scale + i * lanes + (b / 2) * 16 + (b % 2) * 8, 8, d);
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
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t b = 0; b < in / kInt4Block; ++b) {
      int8_t* chunk = q + i * row_bytes + (b / 4) * kInt4Chunk + (b % 4) * 16;
      float d;
      const int32_t sum = quantize(x + i * in + b * kInt4Block, kInt4Block, chunk, chunk + 64, &d);
      std::fill_n(lane_scale + i * lanes + (b / 4) * 16 + (b % 4) * 4, 4, d);
      float& s = group_sum[i * sums + b * kInt4Block / group];
      s = std::fma(d, static_cast<float>(sum), s);
    }
  }
}

}  // namespace medq::engine::kernels
