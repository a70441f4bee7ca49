// Portable dense kernels: plain C++, no intrinsics. Used on CPUs without
// AVX2/FMA and, through the test switch, to check the SIMD kernels against.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine::kernels {
namespace {

// Eight independent partial sums: shorter dependency chains than one running
// sum, and the compiler may vectorize them with the baseline ISA.
constexpr int kLanes = 8;

inline float Bf16ToF32(uint16_t bits) {
  const uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof(value));
  return value;
}

template <typename Load>
inline float Dot(int64_t in, const float* x, Load load) {
  float acc[kLanes] = {};
  int64_t k = 0;
  for (; k + kLanes <= in; k += kLanes) {
    for (int l = 0; l < kLanes; ++l)
      acc[l] += load(k + l) * x[k + l];
  }
  for (; k < in; ++k)
    acc[0] += load(k) * x[k];
  float sum = 0.0f;
  for (float a : acc)
    sum += a;
  return sum;
}

void MatVecF32(const float* w, int64_t in, const float* x, const float* bias, float* y,
               int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* row = w + r * in;
    const float dot = Dot(in, x, [row](int64_t k) { return row[k]; });
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

void MatVecBf16(const uint16_t* w, int64_t in, const float* x, const float* bias, float* y,
                int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint16_t* row = w + r * in;
    const float dot = Dot(in, x, [row](int64_t k) { return Bf16ToF32(row[k]); });
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

void MatMulBf16(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                const float* bias, float* y, int64_t row_begin, int64_t row_end, float* block) {
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kBf16RowBlock) {
    const int64_t rows = r0 + kBf16RowBlock <= row_end ? kBf16RowBlock : row_end - r0;
    for (int64_t j = 0; j < rows * in; ++j)
      block[j] = Bf16ToF32(w[r0 * in + j]);
    for (int64_t i = 0; i < m; ++i) {
      MatVecF32(block, in, x + i * in, nullptr, y + i * out + r0, 0, rows);
      if (bias != nullptr) {
        for (int64_t j = 0; j < rows; ++j)
          y[i * out + r0 + j] += bias[r0 + j];
      }
    }
  }
}

void ConvertBf16(const uint16_t* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i)
    dst[i] = Bf16ToF32(src[i]);
}

// Each weight row against every x row with MatVecF32's / MatVecBf16's Dot:
// the row is read from memory for the first x row and from L1 after.
void MatRowsF32(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float* row = w + r * in;
    for (int64_t i = 0; i < m; ++i) {
      const float dot = Dot(in, x + i * in, [row](int64_t k) { return row[k]; });
      y[i * out + r] = bias != nullptr ? dot + bias[r] : dot;
    }
  }
}

void MatRowsBf16(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                 const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint16_t* row = w + r * in;
    for (int64_t i = 0; i < m; ++i) {
      const float dot = Dot(in, x + i * in, [row](int64_t k) { return Bf16ToF32(row[k]); });
      y[i * out + r] = bias != nullptr ? dot + bias[r] : dot;
    }
  }
}

// Row by row, each column summed in order of s: the attention sum as it was
// written before the tables had this kernel, with the same results.
void VecMatF32(const float* p, const float* w, int64_t n, int64_t d, float* y) {
  for (int64_t i = 0; i < d; ++i)
    y[i] = 0.0f;
  for (int64_t s = 0; s < n; ++s) {
    const float* row = w + s * d;
    for (int64_t i = 0; i < d; ++i)
      y[i] += p[s] * row[i];
  }
}

// The decode step's activation as it was written before the tables had it.
void SiluMulF32(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t j = 0; j < n; ++j)
    out[j] = gate[j] / (1.0f + std::exp(-gate[j])) * up[j];
}

// Each key's score as the scalar matvec computes a row: the attention scores
// as they were written before the tables had this kernel.
void ScoresF32(const float* keys, int64_t n, int64_t d, const float* q, float scale,
               float* scores) {
  for (int64_t s = 0; s < n; ++s) {
    const float* key = keys + s * d;
    scores[s] = Dot(d, q, [key](int64_t k) { return key[k]; }) / scale;
  }
}

// The softmax as it was written before the tables had it, with std::exp.
void SoftmaxF32(float* p, int64_t n) {
  float max = -INFINITY;
  for (int64_t s = 0; s < n; ++s)
    max = std::fmax(max, p[s]);
  float sum = 0.0f;
  for (int64_t s = 0; s < n; ++s)
    sum += (p[s] = std::exp(p[s] - max));
  for (int64_t s = 0; s < n; ++s)
    p[s] /= sum;
}

// One fused multiply-add at a time in k order, as every table's packed_bf16
// (dense_kernels.h): std::fma rounds once, as the vector FMA does.
void PackedBf16(const uint16_t* packed, int64_t in, int64_t out, const float* x, int64_t m,
                const float* bias, float* y, int64_t tile_begin, int64_t tile_end) {
  for (int64_t t = tile_begin; t < tile_end; ++t) {
    const uint16_t* tile = packed + t * in * kPackedTileRows;
    for (int64_t j = 0; j < kPackedTileRows && t * kPackedTileRows + j < out; ++j) {
      const int64_t r = t * kPackedTileRows + j;
      const int64_t position = PackedTilePosition(j);
      for (int64_t i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (int64_t k = 0; k < in; ++k)
          sum = std::fma(Bf16ToF32(tile[k * kPackedTileRows + position]), x[i * in + k], sum);
        y[i * out + r] = bias != nullptr ? sum + bias[r] : sum;
      }
    }
  }
}

// The int8 dot product of weight row w with prepared x row i, in the order
// every table's int8 kernels sum it (dense_kernels.h, MatVecI8Fn).
float DotI8(const int8_t* w, const I8Rows& x, int64_t i) {
  const int64_t in = x.in;
  const int8_t* q = x.q + i * I8RowBytes(in);
  const float* ls = x.lane_scale + i * I8RowLanes(in);
  float a[16] = {};
  for (int64_t span = 0; span * kInt8Span < in; ++span) {
    for (int64_t l = 0; l < 16; ++l) {
      int32_t p = 0;
      for (int64_t c = 0; c < kInt8Span / kInt8Chunk; ++c) {
        for (int64_t u = 0; u < 4; ++u) {
          const int64_t k = span * kInt8Span + c * kInt8Chunk + 4 * l + u;
          if (k < in) p += w[k] * q[k];
        }
      }
      a[l] = std::fma(static_cast<float>(p), ls[span * 16 + l], a[l]);
    }
  }
  float v[8];
  for (int l = 0; l < 8; ++l)
    v[l] = a[l] + a[l + 8];
  float h[4];
  for (int l = 0; l < 4; ++l)
    h[l] = v[l] + v[l + 4];
  return (h[0] + h[2]) + (h[1] + h[3]);
}

inline float ScaleI8(float dot, const float* scale, const float* bias, int64_t r) {
  return bias != nullptr ? std::fma(dot, scale[r], bias[r]) : dot * scale[r];
}

void MatVecI8(const int8_t* w, const float* scale, const I8Rows& x, const float* bias, float* y,
              int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r)
    y[r] = ScaleI8(DotI8(w + r * x.in, x, 0), scale, bias, r);
}

void MatRowsI8(const int8_t* w, const float* scale, const I8Rows& x, int64_t out, int64_t m,
               const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t i = 0; i < m; ++i)
      y[i * out + r] = ScaleI8(DotI8(w + r * x.in, x, i), scale, bias, r);
  }
}

void DequantizeI8(const int8_t* q, const float* scale, int64_t rows, int64_t in, float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < in; ++k)
      dst[r * in + k] = static_cast<float>(q[r * in + k]) * scale[r];
  }
}

// The int4 weight k of a row `in` wide (dense_kernels.h, MatVecI4Fn).
inline int Int4At(const uint8_t* w, int64_t in, int64_t k) {
  const Int4Place p = Int4PlaceOf(in, k);
  return w[p.byte] >> p.shift & 0xF;
}

// Weight k dequantized: fma(q, s, m) with its group's bf16 scale and minimum.
inline float Int4Weight(const uint8_t* w, const uint16_t* params, int64_t in, int64_t group,
                        int64_t k) {
  const uint16_t* p = params + 2 * (k / group);
  return std::fma(static_cast<float>(Int4At(w, in, k)), Bf16ToF32(p[0]), Bf16ToF32(p[1]));
}

// One value of x as the products round it (dense_kernels.h): v = x · (127
// / amax) rounded to nearest even, as vcvtps2dq and the saturating packs to
// int8 give it (the block's values are finite here, so |v| <= 127).
inline int8_t QuantizeXValue(float v) {
  return static_cast<int8_t>(std::clamp(std::lrint(v), -128L, 127L));
}

// quantize_x_block (dense_kernels.h, QuantizeXBlockFn).
int32_t QuantizeXBlock(const float* x, int64_t n, int8_t* lo, int8_t* hi, float* d) {
  float amax = 0.0f;
  bool finite = true;
  for (int64_t t = 0; t < n; ++t) {
    finite = finite && std::fabs(x[t]) <= std::numeric_limits<float>::max();
    amax = std::max(amax, std::fabs(x[t]));
  }
  *d = 0.0f;
  if (!finite) *d = std::numeric_limits<float>::quiet_NaN();
  if (!finite || !(amax >= 1e-30f)) return 0;
  *d = amax / 127.0f;
  const float id = 127.0f / amax;
  int32_t sum = 0;
  for (int64_t t = 0; t < n; ++t) {
    const int8_t v = QuantizeXValue(x[t] * id);
    (t < 16 ? lo[t] : hi[t - 16]) = v;
    sum += v;
  }
  return sum;
}

// quantize_x_span (dense_kernels.h, QuantizeXSpanFn): the generic one.
void QuantizeXSpan(const float* x, int64_t n, int8_t* q, float* d, int32_t* offset) {
  QuantizeXSpanWith(&QuantizeXBlock, x, n, q, d, offset);
}

// The int4 dot product of weight row w with prepared x row i, in the order
// every table's int4 kernels sum it (dense_kernels.h, MatVecI4Fn).
float DotI4(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t i) {
  const int64_t in = x.in, group = x.group;
  const int8_t* q = x.q + i * I4RowBytes(in);
  const float* ls = x.lane_scale + i * I4RowLaneScales(in);
  const float* gs = x.group_sum + i * I4RowGroupSums(in, group);
  const int64_t blocks = in / kInt4Block;
  float a[16] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t span = b / kInt4SpanBlocks, l = b % kInt4SpanBlocks;
    const int8_t* xs = q + span * kInt4SpanBytes;
    const float sd = Bf16ToF32(params[2 * (b * kInt4Block / group)]) * ls[span * 16 + l];
    // Word t's products: its four weights low and high, with their x.
    const auto word = [&](int64_t t, const int8_t* xlo, const int8_t* xhi) {
      int32_t p = 0;
      for (int64_t u = 0; u < 4; ++u) {
        const int64_t j = 4 * t + u;
        p += Int4At(w, in, 32 * b + j) * xlo[u] + Int4At(w, in, 32 * b + 16 + j) * xhi[u];
      }
      return p;
    };
    if (Int4SpanLength(blocks, span) >= kInt4InterleavedBlocks) {
      int32_t p = 0;  // the block's lane l
      for (int64_t t = 0; t < 4; ++t)
        p += word(t, xs + 128 * t + 4 * l, xs + 128 * t + 64 + 4 * l);
      a[l] = std::fma(static_cast<float>(p), sd, a[l]);
    } else {
      const int8_t* xc = xs + 128 * (l / 4) + 16 * (l % 4);  // lanes 4i + t
      for (int64_t t = 0; t < 4; ++t) {
        const int64_t lane = 4 * (l % 4) + t;
        a[lane] = std::fma(static_cast<float>(word(t, xc + 4 * t, xc + 64 + 4 * t)), sd, a[lane]);
      }
    }
  }
  for (int64_t g = 0; g < in / group; ++g)
    a[g % 16] = std::fma(Bf16ToF32(params[2 * g + 1]), gs[g], a[g % 16]);
  float v[8];
  for (int l = 0; l < 8; ++l)
    v[l] = a[l] + a[l + 8];
  float h[4];
  for (int l = 0; l < 4; ++l)
    h[l] = v[l] + v[l + 4];
  return (h[0] + h[2]) + (h[1] + h[3]);
}

void MatVecI4(const uint8_t* w, const uint16_t* params, const I4Rows& x, const float* bias,
              float* y, int64_t row_begin, int64_t row_end) {
  const int64_t groups = x.in / x.group;
  for (int64_t r = row_begin; r < row_end; ++r) {
    const float dot = DotI4(w + r * (x.in / 2), params + r * 2 * groups, x, 0);
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

void MatRowsI4(const uint8_t* w, const uint16_t* params, const I4Rows& x, int64_t out, int64_t m,
               const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  const int64_t groups = x.in / x.group;
  for (int64_t r = row_begin; r < row_end; ++r) {
    for (int64_t i = 0; i < m; ++i) {
      const float dot = DotI4(w + r * (x.in / 2), params + r * 2 * groups, x, i);
      y[i * out + r] = bias != nullptr ? dot + bias[r] : dot;
    }
  }
}

void DequantizeI4(const uint8_t* w, const uint16_t* params, int64_t rows, int64_t in, int64_t group,
                  float* dst) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t k = 0; k < in; ++k)
      dst[r * in + k] = Int4Weight(w + r * (in / 2), params + r * 2 * (in / group), in, group, k);
  }
}

// matvec_bf16 and matrows_bf16 here read x as it is.
void PrepareBf16Rows(const float* x, int64_t m, int64_t in, float* prepared) {
  std::memcpy(prepared, x, static_cast<size_t>(m * in) * sizeof(float));
}

}  // namespace

const DenseKernels& ScalarKernels() {
  static constexpr DenseKernels kTable{
      "scalar",    &MatVecF32,      &MatVecBf16,    &PrepareBf16Rows, &MatMulBf16, &ConvertBf16,
      &MatRowsF32, &MatRowsBf16,    &PackedBf16,    &VecMatF32,       &SiluMulF32, &ScoresF32,
      &SoftmaxF32, &QuantizeXBlock, &QuantizeXSpan, &MatVecI8,        &MatRowsI8,  &DequantizeI8,
      &MatVecI4,   &MatRowsI4,      &DequantizeI4};
  return kTable;
}

}  // namespace medq::engine::kernels
