// The AVX2+FMA table's matrows kernels and the matvecs that compute each row
// as they do, built with -mavx2 -mfma like dense_kernels_avx2.cc: one pass
// over each weight row for up to four x rows, float32 and bf16 weights.
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/dense_kernels_rows.h"

namespace medq::engine::kernels {
namespace {

// One weight row against up to kPassRows x rows in one pass.
//
// Each dot product keeps two sums, a and b, over every 16-weight block in k
// order: bf16, the even and the odd elements (a shift and a mask split a
// 16-weight load that way, SplitBf16); float32, the first and the second
// eight (and a remaining eight into a). It returns HorizontalSum(a + b) plus
// the scalar tail. The matvec is this pass with one x row, so every row of a
// batch is bitwise what it would be alone.
//
// Why one pass for four x rows: two sums a dot product leave room for four x
// rows' in the 16 registers (eight sums, the weights' two halves, the mask),
// so each row is read from memory once, at one steady pace, while the FMAs
// of all four run. The one-row tiles of dense_kernels_rows.h, which this
// table ran before (four sums a dot product, so two x rows a tile), stream
// the row in the first tile and compute the second from L1 while memory
// idles. Measured on the Zen 3 VM (AVX2, no AVX-512), a throwaway harness
// running the kernels on two threads over a 576 x 65536 bf16 matrix from
// memory, seven rounds alternating, median (range): four x rows 3.77 ms
// (3.70-3.81) a pass against 4.57 (3.97-6.56) for the two-row tiles; one x
// row 3.48 (3.36-5.39) against 4.21 (4.07-5.55) for the four-sum kernel.
// float32, engine_bench --batch SmolLM-135M, three rounds alternating, step
// ms one / four sequences: 25.62 / 31.33, 23.49 / 28.14, 21.23 / 27.35
// against the two-row tiles' 27.06 / 38.64, 24.28 / 36.16, 23.66 / 30.88.
constexpr int kPassRows = 4;

// Sixteen float32 weights at w against the M x rows at x (row stride in):
// the first eight products into `a`, the second eight into `b`, as
// AddSplit splits sixteen bf16 weights into even and odd elements.
template <int M>
inline void AddPair(const float* w, int64_t in, const float* x, __m256* a, __m256* b) {
  const __m256 w0 = _mm256_loadu_ps(w);
  for (int i = 0; i < M; ++i)
    a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * in), a[i]);
  const __m256 w1 = _mm256_loadu_ps(w + 8);
  for (int i = 0; i < M; ++i)
    b[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i * in + 8), b[i]);
}
template <int M>
inline void AddPair(const uint16_t* w, int64_t in, const float* x, __m256* a, __m256* b) {
  AddSplit<M>(w, in, x, a, b);
}

// After the 16-weight blocks, from k: float32 adds a remaining 8 into `a`
// (bf16 adds none). Returns where the scalar tail starts.
template <int M>
inline int64_t AddPairRemainder(const float* w, int64_t in, const float* x, int64_t k, __m256* a) {
  if (k + 8 > in) return k;
  const __m256 w0 = _mm256_loadu_ps(w + k);
  for (int i = 0; i < M; ++i)
    a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * in + k), a[i]);
  return k + 8;
}
template <int M>
inline int64_t AddPairRemainder(const uint16_t* /*w*/, int64_t /*in*/, const float* /*x*/,
                                int64_t k, __m256* /*a*/) {
  return k;
}

// dots[i] = the dot product of the weight row at w with x row i of the M at
// x (row stride in; bf16: laid out by PrepareBf16X). kStream: the row comes
// from memory, so the weights kStreamPrefetchBytes on are asked for into L2;
// otherwise (a later pass over a row in L1) the rows to come are asked for
// kPrefetchBytes ahead. The result is the same either way.
template <int M, bool kStream, typename T>
inline void PairPass(const T* w, int64_t in, const float* x, float* dots) {
  __m256 a[M], b[M];
  for (int i = 0; i < M; ++i) {
    a[i] = _mm256_setzero_ps();
    b[i] = _mm256_setzero_ps();
  }
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if constexpr (kStream) {
      PrefetchStreamBlock(w + k);
    } else {
      PrefetchBlockAhead<_MM_HINT_T0>(w + k, kPrefetchBytes);
    }
    AddPair<M>(w + k, in, x + k, a, b);
    AddPair<M>(w + k + 16, in, x + k + 16, a, b);
  }
  if (k + 16 <= in) {
    AddPair<M>(w + k, in, x + k, a, b);
    k += 16;
  }
  k = AddPairRemainder<M>(w, in, x, k, a);
  for (int i = 0; i < M; ++i)
    dots[i] = AddTail(HorizontalSum(_mm256_add_ps(a[i], b[i])), w, x + i * in, k, in);
}

// x rows [i, i + n) of one weight row, n <= kPassRows.
template <bool kStream, typename T>
inline void PairPassOf(int64_t n, const T* wr, int64_t in, const float* x, float* dots) {
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

template <typename T>
inline void MatVecPasses(const T* w, int64_t in, const float* x, const float* bias, float* y,
                         int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r) {
    float dot;
    PairPass<1, true>(w + r * in, in, x, &dot);
    y[r] = bias != nullptr ? dot + bias[r] : dot;
  }
}

// Every weight row in [row_begin, row_end) against the m x rows, kPassRows
// at a time: the first pass streams the row, the later ones find it in L1.
template <typename T>
inline void MatRowsPasses(const T* w, int64_t in, int64_t out, const float* x, int64_t m,
                          const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  float dots[kPassRows];
  for (int64_t r = row_begin; r < row_end; ++r) {
    const T* wr = w + r * in;
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

}  // namespace

void MatVecF32Avx2(const float* w, int64_t in, const float* x, const float* bias, float* y,
                   int64_t row_begin, int64_t row_end) {
  MatVecPasses(w, in, x, bias, y, row_begin, row_end);
}

void MatVecBf16Avx2(const uint16_t* w, int64_t in, const float* x, const float* bias, float* y,
                    int64_t row_begin, int64_t row_end) {
  MatVecPasses(w, in, x, bias, y, row_begin, row_end);
}

void MatRowsF32Avx2(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                    const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsPasses(w, in, out, x, m, bias, y, row_begin, row_end);
}

void MatRowsBf16Avx2(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                     const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsPasses(w, in, out, x, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels
