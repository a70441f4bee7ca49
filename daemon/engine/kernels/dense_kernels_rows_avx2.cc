// The AVX2+FMA table's matrows kernels, built with -mavx2 -mfma like
// dense_kernels_avx2.cc: float32 weights in the one-row tiles of
// dense_kernels_rows.h (one weight row and two x rows); bf16 weights, and the
// bf16 matvec the table pairs with them, in one pass over each weight row for
// up to four x rows (below).
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/dense_kernels_rows.h"

namespace medq::engine::kernels {
namespace {

// bf16 weights: one weight row against up to kPassRows x rows in one pass.
//
// Each dot product keeps two sums, of the even and of the odd elements of
// every 16-weight block in k order (a shift and a mask split a 16-weight
// load that way, SplitBf16), then returns HorizontalSum(even + odd) plus the
// scalar tail. The matvec is this pass with one x row, so every row of a
// batch is bitwise what it would be alone.
//
// Why one pass for four x rows: two sums a dot product leave room for four x
// rows' in the 16 registers (eight sums, the weights' two halves, the mask),
// so each row is read from memory once, at one steady pace, while the FMAs
// of all four run. The one-row tiles of dense_kernels_rows.h (four sums a
// dot product, so two x rows a tile) stream the row in the first tile and
// compute the second from L1, and memory idles meanwhile. Measured on the
// Zen 3 VM (AVX2, no AVX-512), a throwaway harness running the kernels on two
// threads over a 576 x 65536 bf16 matrix from memory, seven rounds
// alternating, median (range): four x rows 3.77 ms (3.70-3.81) a pass
// against 4.57 (3.97-6.56) for the two-row tiles; one x row 3.48 (3.36-5.39)
// against 4.21 (4.07-5.55) for the four-sum kernel.
constexpr int kPassRows = 4;

// dots[i] = the dot product of the bf16 weight row at w with x row i of the
// M at x (row stride in, laid out by PrepareBf16X). kStream: the row comes
// from memory, so the weights kStreamPrefetchBytes on are asked for into L2;
// otherwise (a later pass over a row in L1) the rows to come are asked for
// kPrefetchBytes ahead. The result is the same either way.
template <int M, bool kStream>
inline void PairPass(const uint16_t* w, int64_t in, const float* x, float* dots) {
  __m256 even[M], odd[M];
  for (int i = 0; i < M; ++i) {
    even[i] = _mm256_setzero_ps();
    odd[i] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if constexpr (kStream) {
      PrefetchStreamBlock(w + k);
    } else {
      Prefetch(w + k);
    }
    AddSplit<M>(w + k, in, x + k, even, odd);
    AddSplit<M>(w + k + 16, in, x + k + 16, even, odd);
  }
  if (k + 16 <= in) {
    AddSplit<M>(w + k, in, x + k, even, odd);
    k += 16;
  }
  for (int i = 0; i < M; ++i)
    dots[i] = AddTail(HorizontalSum(_mm256_add_ps(even[i], odd[i])), w, x + i * in, k, in);
}

// x rows [i, i + n) of one weight row, n <= kPassRows.
template <bool kStream>
inline void PairPassOf(int64_t n, const uint16_t* wr, int64_t in, const float* x, float* dots) {
  switch (n) {
    case 1:
      return PairPass<1, kStream>(wr, in, x, dots);
    case 2:
      return PairPass<2, kStream>(wr, in, x, dots);
    case 3:
      return PairPass<3, kStream>(wr, in, x, dots);
    default:
      return PairPass<kPassRows, kStream>(wr, in, x, dots);
  }
}

}  // namespace

void MatRowsF32Avx2(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                    const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRows(w, in, out, x, m, bias, y, row_begin, row_end);
}

void MatVecBf16Avx2(const uint16_t* w, int64_t in, const float* x, const float* bias, float* y,
                    int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    float dot;
    PairPass<1, true>(w + r * in, in, x, &dot);
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

void MatRowsBf16Avx2(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                     const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  float dots[kPassRows];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const uint16_t* wr = w + r * in;
    for (int64_t i = 0; i < m; i += kPassRows) {
      const int64_t n = m - i < kPassRows ? m - i : kPassRows;
      if (i == 0) {
        PairPassOf<true>(n, wr, in, x, dots);
      } else {
        PairPassOf<false>(n, wr, in, x + i * in, dots);
      }
      for (int64_t j = 0; j < n; ++j)
        Store(y, out, bias, i + j, r, dots[j]);
    }
  }
}

}  // namespace medq::engine::kernels
