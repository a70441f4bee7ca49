// Portable dense kernels: plain C++, no intrinsics. Used on CPUs without
// AVX2/FMA and, through the test switch, to check the SIMD kernels against.
#include <cmath>
#include <cstring>

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

// matvec_bf16 and matrows_bf16 here read x as it is.
void PrepareBf16Rows(const float* x, int64_t m, int64_t in, float* prepared) {
  std::memcpy(prepared, x, static_cast<size_t>(m * in) * sizeof(float));
}

}  // namespace

const DenseKernels& ScalarKernels() {
  static constexpr DenseKernels kTable{"scalar",    &MatVecF32,   &MatVecBf16, &PrepareBf16Rows,
                                       &MatMulBf16, &ConvertBf16, &MatRowsF32, &MatRowsBf16,
                                       &PackedBf16, &VecMatF32,   &SiluMulF32, &ScoresF32,
                                       &SoftmaxF32};
  return kTable;
}

}  // namespace medq::engine::kernels
