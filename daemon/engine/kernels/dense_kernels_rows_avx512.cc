// The AVX-512 table's matrows kernels, built with -mavx2 -mfma -mavx512f
// -mavx512vl: tiles of two weight rows against up to four x rows, whose
// accumulators are 512-bit registers, and every result bitwise the AVX2
// one-row kernel's (the matvec both tables share; dense_kernels_rows.h says
// how the one-row kernel sums).
//
// Why 512 bits: a one-row kernel's accumulators a and b sum adjacent 8-wide
// groups of every 32 products (f32: elements 0-7 and 8-15; bf16 with x laid
// out by PrepareBf16X: the even and the odd elements of the first 16, against
// x's 16 contiguous floats), and c and d the next two. So one 512-bit
// register p holds a | b and another q holds c | d, lane for lane the same
// sums in the same order; at the end of the row p and q are split back into
// a, b, c, d, and the one-row kernel's remainder, reduction and tail finish
// them. Half the accumulator registers per weight and x row let a tile cover
// two weight rows and four x rows (16 of the 32 registers): each weight
// vector feeds four FMAs and each x vector two, and a 512-bit FMA does the
// work of two 256-bit ones in one instruction. On the 2-core Zen 4 VM, one
// thread, four x rows: 0.021 to 0.026 ns per weight and x row from L1
// against 0.028 to 0.034 for the 256-bit tiles of two weight rows and two x
// rows this replaced, and 7 to 16% less time from memory (the two templates
// side by side; bench/engine/README.md has whole decode steps).
//
// Four x rows are one pass over each pair of weight rows, so every tile
// streams its rows from memory; two rows read side by side are followed badly
// by the hardware prefetcher, so each tile asks for the pair of rows after
// next as it goes (PrefetchNextPair). Two x rows or fewer run the one-row tiles
// (kMaxOneRowX).
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/dense_kernels_rows.h"

// GCC 12 reports the undefined pass-through operand inside the 512-bit
// extract and insert intrinsics as uninitialized once they are inlined (GCC
// bug 105593); that operand is never read. The report names the intrinsics'
// header, so the warnings are off for this file's code as a whole.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace medq::engine::kernels {
namespace {

// Weight rows per tile.
constexpr int kRows = 2;
// The most x rows per tile: 2 x 4 pairs of two 512-bit accumulators, plus
// the four weight vectors and an x vector, fit the 32 registers.
constexpr int kMaxX = 4;
// Up to this many x rows, the AVX2 table's one-row tiles (MatRows) run
// instead: one x-row pair is a single tile per weight row, which streams its
// row as the matvec does, while a two-row tile streams two rows side by side.
// engine_bench --batch, two threads, two rounds against the AVX2 table: two
// sequences took 6 of 8 cases longer with 512-bit tiles (SmolLM-135M bf16
// 14.3 / 14.5 ms against 10.5 / 13.1), and the earlier 256-bit two-row tiles
// were no better there (bench/engine/README.md).
constexpr int64_t kMaxOneRowX = 2;

// How many pairs of rows ahead of the tile PrefetchNextPair asks for: the
// pair after next, so that a pair is requested a whole tile's time before it
// is read. One pair ahead left too little time for this VM's memory latency
// with four x rows of arithmetic a weight: engine_bench --batch, the two
// alternating over seven rounds, step time at four sequences 12% less for
// SmolLM-135M fp32 (median 21.9 against 24.9 ms), 4% bf16, 9% Qwen2.5-0.5B
// fp32, 6% bf16; at eight, -3% to +2%; less in 37 of the 56 comparisons.
constexpr int64_t kPairsAhead = 2;

// For a tile of two weight rows at w (in elements each) that has reached
// element k of each: prefetches the pair kPairsAhead pairs on (2 * in
// elements a pair) at twice the pace the tile walks a row, so that by the
// tile's end that pair is on its way. `lines` is the cache lines a row
// advances per call (one per 64 bytes of weights). Without it, a tile reading
// two rows at once was 2.5 times slower from memory (two rows of SmolLM's
// layers against two x rows, bf16, one thread: 25.5 ms against 10.6 ms).
template <typename T>
inline void PrefetchNextPair(const T* w, int64_t in, int64_t k, int lines) {
  const int64_t next = kPairsAhead * 2 * in * static_cast<int64_t>(sizeof(T));
  const int64_t walked = 2 * k * static_cast<int64_t>(sizeof(T));
  for (int q = 0; q < 2 * lines; ++q)
    PrefetchAt(w, next + walked + 64 * q);
}

// Loads sixteen floats into a register the compiler must keep: without the
// empty asm, GCC folds the load into every FMA that uses it, and a vector
// meant for two FMAs is read twice.
inline __m512 LoadKept(const float* p) {
  __m512 v = _mm512_loadu_ps(p);
  asm("" : "+v"(v));
  return v;
}

// Lanes 8-15.
inline __m256 High(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// Two 256-bit halves as one 512-bit register: lo in lanes 0-7, hi in 8-15.
inline __m512 Join(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(
      _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)), _mm256_castps_pd(hi), 1));
}

// The 512-bit accumulators of a tile: p = a | b, q = c | d for each weight
// row r and x row i, zeroed.
template <int M>
struct WideSums {
  __m512 p[kRows][M], q[kRows][M];

  WideSums() {
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r) {
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        p[r][i] = _mm512_setzero_ps();
        q[r][i] = _mm512_setzero_ps();
      }
    }
  }

  // Weight row r's accumulators as the one-row kernel's a, b, c, d.
  Sums<M> Narrow(int r) const {
    Sums<M> s;
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      s.a[i] = _mm512_castps512_ps256(p[r][i]);
      s.b[i] = High(p[r][i]);
      s.c[i] = _mm512_castps512_ps256(q[r][i]);
      s.d[i] = High(q[r][i]);
    }
    return s;
  }

  // One 32-element block: wp / wq are each weight row's (a | b) and (c | d)
  // weights, x points at the block in x row 0 (row stride in).
  void Add(const __m512 (&wp)[kRows], const __m512 (&wq)[kRows], const float* x, int64_t in) {
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      const __m512 xp = LoadKept(x + i * in);
#pragma GCC unroll 2
      for (int r = 0; r < kRows; ++r)
        p[r][i] = _mm512_fmadd_ps(wp[r], xp, p[r][i]);
      const __m512 xq = LoadKept(x + i * in + 16);
#pragma GCC unroll 2
      for (int r = 0; r < kRows; ++r)
        q[r][i] = _mm512_fmadd_ps(wq[r], xq, q[r][i]);
    }
  }
};

// Sixteen weights at w as the floats an (a | b) or (c | d) accumulator takes:
// f32 as they are; bf16 split as SplitDotBf16 splits them, the even elements
// in lanes 0-7 and the odd ones in 8-15.
inline __m512 Wide(const float* w) {
  return LoadKept(w);
}
inline __m512 Wide(const uint16_t* w) {
  __m256 even, odd;
  SplitBf16(w, &even, &odd);
  return Join(even, odd);
}

// dots[r * M + i] = the one-row kernel's dot product (Dot1 for f32,
// SplitDotBf16 for bf16, x rows then laid out by PrepareBf16X) of weight row
// r (w and w + in) and x row i of the M at x.
template <int M, typename T>
inline void PairTile(const T* w, int64_t in, const float* x, float* dots) {
  constexpr int kLines = 32 * static_cast<int>(sizeof(T)) / 64;  // per row and block
  WideSums<M> z;
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    PrefetchNextPair(w, in, k, kLines);
    __m512 wp[kRows], wq[kRows];
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r) {
      wp[r] = Wide(w + r * in + k);
      wq[r] = Wide(w + r * in + k + 16);
    }
    z.Add(wp, wq, x + k, in);
  }
#pragma GCC unroll 2
  for (int r = 0; r < kRows; ++r) {
    Sums<M> s = z.Narrow(r);
    const T* wr = w + r * in;
    s.Finish(wr, in, x, AddRemainder(wr, in, x, k, s), dots + r * M);
  }
}

// Weight rows r and r + 1 at wr against x rows [i, i + M).
template <int M, typename T>
inline void StorePairTile(const T* wr, int64_t in, int64_t out, const float* x, int64_t i,
                          const float* bias, float* y, int64_t r) {
  float dots[kRows * M];
  PairTile<M>(wr, in, x + i * in, dots);
  for (int q = 0; q < kRows; ++q) {
    for (int j = 0; j < M; ++j)
      Store(y, out, bias, i + j, r + q, dots[q * M + j]);
  }
}

// Weight rows two at a time against x rows four at a time (the last one to
// three together), an odd last weight row as in MatRows; up to kMaxOneRowX x
// rows, MatRows itself.
template <typename T>
inline void MatRowsWide(const T* w, int64_t in, int64_t out, const float* x, int64_t m,
                        const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  if (m <= kMaxOneRowX) return MatRows(w, in, out, x, m, bias, y, row_begin, row_end);
  int64_t r = row_begin;
  for (; r + kRows <= row_end; r += kRows) {
    const T* wr = w + r * in;
    int64_t i = 0;
    for (; i + kMaxX <= m; i += kMaxX)
      StorePairTile<kMaxX>(wr, in, out, x, i, bias, y, r);
    switch (m - i) {
      case 3:
        StorePairTile<3>(wr, in, out, x, i, bias, y, r);
        break;
      case 2:
        StorePairTile<2>(wr, in, out, x, i, bias, y, r);
        break;
      case 1:
        StorePairTile<1>(wr, in, out, x, i, bias, y, r);
        break;
      default:
        break;
    }
  }
  if (r < row_end) OneWeightRow(w + r * in, in, out, x, m, bias, y, r);
}

}  // namespace

void MatRowsF32Avx512(const float* w, int64_t in, int64_t out, const float* x, int64_t m,
                      const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsWide(w, in, out, x, m, bias, y, row_begin, row_end);
}

void MatRowsBf16Avx512(const uint16_t* w, int64_t in, int64_t out, const float* x, int64_t m,
                       const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  MatRowsWide(w, in, out, x, m, bias, y, row_begin, row_end);
}

}  // namespace medq::engine::kernels

#pragma GCC diagnostic pop
