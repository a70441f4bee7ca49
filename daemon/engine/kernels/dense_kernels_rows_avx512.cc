// The AVX-512 table's matrows kernels, built with -mavx2 -mfma -mavx512f
// -mavx512vl: tiles of two weight rows against up to four x rows, whose
// accumulators are 512-bit registers, and every result bitwise the AVX2
// one-row kernel's (the matvec both tables share; dense_kernels_rows.h says
// how the one-row kernel sums).
//
// Why 512 bits: a one-row kernel's accumulators a, b, c and d each sum an
// 8-wide group of every 32 products (f32: elements 0-7, 8-15, 16-23, 24-31;
// bf16: the even and the odd elements of the first 16, then of the second
// 16). So two 512-bit registers hold the four, lane for lane the same sums in
// the same order: p = a | b and q = c | d for f32, p = a | c and q = b | d
// for bf16, whose 32 weights a shift and a mask split that way in one 512-bit
// register each (WideBlock; PrepareBf16RowsAvx512 lays x out to match). At
// the end of the row p and q are split back into a, b, c, d, and the one-row
// kernel's remainder, reduction and tail finish them. Half the accumulator
// registers per weight and x row let a tile cover two weight rows and four x
// rows (16 of the 32 registers): each weight vector feeds four FMAs and each
// x vector two, and a 512-bit FMA does the work of two 256-bit ones in one
// instruction. On the 2-core Zen 4 VM, one thread, four x rows: 0.021 to
// 0.026 ns per weight and x row from L1 against 0.028 to 0.034 for the
// 256-bit tiles of two weight rows and two x rows this replaced, and 7 to 16%
// less time from memory (the two templates side by side;
// bench/engine/README.md has whole decode steps).
//
// Four x rows are one pass over each pair of weight rows, so every tile
// streams its rows from memory; two rows read side by side are followed badly
// by the hardware prefetcher, so each tile asks for both rows' weights to
// come as it goes (PrefetchRowStreams). Up to kMaxOneRowX x rows (bf16 two, f32
// one) run the one-row tiles; an odd last weight row, a tile of one weight
// row.
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
// bf16 keeps them for two sequences: engine_bench --batch, two threads, two
// rounds against the AVX2 table, two sequences took 6 of 8 cases longer with
// 512-bit tiles (SmolLM-135M bf16 14.3 / 14.5 ms against 10.5 / 13.1), and
// with the tiles' earlier prefetch into L2 (of the pair of rows after next)
// the dense layers alone (kernels_bench --only matrows) still took
// Qwen2.5-0.5B's two rows 41.7 ms against 39.1; with PrefetchRowStreams,
// two SmolLM-135M sequences were faster as a 512-bit tile and two
// Qwen2.5-0.5B ones slower (bench/engine/README.md). f32 runs two rows as a
// 512-bit tile since that earlier prefetch: SmolLM-135M 20.4 ms against
// 25.0, Qwen2.5-0.5B 71.2 against 88.2 (the one-row tiles read f32 rows
// without software prefetch).
template <typename T>
constexpr int64_t kMaxOneRowX = sizeof(T) == sizeof(uint16_t) ? 2 : 1;

// For a tile of two weight rows at w (in elements each) that has reached
// element k of each: asks for each row's next block kStreamPrefetchBytes on,
// into L2 (PrefetchStreamBlock, as the matvec streams its one row). Both
// rows run as streams of their own, and the lines asked for are the
// matrix's rows to come, whichever tile reads them. Without a software
// prefetch, a tile reading two rows at once was 2.5 times slower from
// memory (two rows of SmolLM's layers against two x rows, bf16, one
// thread: 25.5 ms against 10.6 ms). This replaced a prefetch of the pair of
// rows after next, swept at twice the tile's pace. The dense layers alone
// (kernels_bench --only matrows), the two alternating three rounds on the
// 2-core Zen 4 VM: eight x rows faster in all 12 cases (1 to 21%), four in
// 9 of 12 (SmolLM-135M bf16 12.98 / 13.38 / 14.57 ms against 16.91 / 13.81
// / 14.65); engine_bench --batch at four sequences, 15 of 19 rounds faster
// (SmolLM-135M bf16 6 of 6, by 1 to 5%).
template <typename T>
inline void PrefetchRowStreams(const T* w, int64_t in, int64_t k) {
  for (int r = 0; r < kRows; ++r)
    PrefetchStreamBlock(w + r * in + k);
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

// The 512-bit accumulators of a tile of R weight rows and M x rows: p and q
// (two of the one-row kernel's a, b, c, d each, Narrow) for each weight row r
// and x row i, zeroed.
template <int R, int M>
struct WideSums {
  __m512 p[R][M], q[R][M];

  WideSums() {
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int i = 0; i < M; ++i) {
        p[r][i] = _mm512_setzero_ps();
        q[r][i] = _mm512_setzero_ps();
      }
    }
  }

  // Weight row r's accumulators as the one-row kernel's a, b, c, d: p = a | b
  // and q = c | d for f32, p = a | c and q = b | d for bf16 (WideBlock).
  template <typename T>
  Sums<M> Narrow(int r) const {
    constexpr bool kBf16 = sizeof(T) == sizeof(uint16_t);
    Sums<M> s;
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      s.a[i] = _mm512_castps512_ps256(p[r][i]);
      s.d[i] = High(q[r][i]);
      if constexpr (kBf16) {
        s.b[i] = _mm512_castps512_ps256(q[r][i]);
        s.c[i] = High(p[r][i]);
      } else {
        s.b[i] = High(p[r][i]);
        s.c[i] = _mm512_castps512_ps256(q[r][i]);
      }
    }
    return s;
  }

  // One 32-element block: wp / wq are each weight row's p and q weights
  // (WideBlock), x points at the block in x row 0 (row stride in).
  void Add(const __m512 (&wp)[R], const __m512 (&wq)[R], const float* x, int64_t in) {
#pragma GCC unroll 4
    for (int i = 0; i < M; ++i) {
      const __m512 xp = LoadKept(x + i * in);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r)
        p[r][i] = _mm512_fmadd_ps(wp[r], xp, p[r][i]);
      const __m512 xq = LoadKept(x + i * in + 16);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r)
        q[r][i] = _mm512_fmadd_ps(wq[r], xq, q[r][i]);
    }
  }
};

// The 32 weights of a block at w as the two 512-bit weight vectors a tile
// multiplies, p's and q's. f32: as they are, (a | b) then (c | d). bf16: one
// 512-bit load, whose 32-bit lane j holds elements 2j and 2j + 1; a shift
// gives the even elements of both halves, (a | c), and a mask the odd ones,
// (b | d): three instructions a block where splitting each half as
// SplitDotBf16 does and joining the halves took eight. From L1, one thread,
// four x rows (kernels_bench --only matrows, two rounds against the joined
// halves): 0.031 to 0.035 ns per weight and x row against 0.035 to 0.036
// (f32: 0.020 to 0.023); whole steps in bench/engine/README.md.
inline void WideBlock(const float* w, __m512* p, __m512* q) {
  *p = LoadKept(w);
  *q = LoadKept(w + 16);
}
inline void WideBlock(const uint16_t* w, __m512* p, __m512* q) {
  __m512i raw = _mm512_loadu_si512(w);
  asm("" : "+v"(raw));  // one load for both, as in LoadKept
  *p = _mm512_castsi512_ps(_mm512_slli_epi32(raw, 16));
  *q = _mm512_castsi512_ps(_mm512_and_si512(raw, _mm512_set1_epi32(kBf16HighHalf)));
}

// The eight dot products of a full tile (kRows x kMaxX), for rows the
// 32-element blocks covered (no remainder, no scalar tail), into dots in
// the tile's order. Each is HorizontalSum((a + b) + (c + d)) of its pair,
// as Sums::Finish makes it, with the same additions of the same operands
// (so bitwise the one-row kernel's), but the eight go through the
// additions together, in 512-bit registers: 29 instructions (bf16; f32
// shuffles its halves first, 16 more) against some 100 a pair at a time,
// which took 5 to 10% of a four-row step of SmolLM-135M's bf16 layers
// (kernels_bench --only matrows, the reductions left out for one
// measurement).
template <typename T>
inline void FinishFullTile(const WideSums<kRows, kMaxX>& z, float* dots) {
  // e = (a + b) | (c + d) for each pair: for bf16 p = a | c and q = b | d;
  // for f32 p = a | b and q = c | d (WideSums::Narrow).
  __m512 e[kRows * kMaxX];
  for (int r = 0; r < kRows; ++r) {
    for (int i = 0; i < kMaxX; ++i) {
      const __m512 p = z.p[r][i], q = z.q[r][i];
      if constexpr (sizeof(T) == sizeof(uint16_t)) {
        e[r * kMaxX + i] = _mm512_add_ps(p, q);
      } else {
        e[r * kMaxX + i] = _mm512_add_ps(_mm512_shuffle_f32x4(p, q, 0x44),   // a | c
                                         _mm512_shuffle_f32x4(p, q, 0xEE));  // b | d
      }
    }
  }
  // s = (a + b) + (c + d), two pairs a register: [s0 | s1], ..., [s6 | s7].
  __m512 s[4];
  for (int j = 0; j < 4; ++j) {
    s[j] = _mm512_add_ps(_mm512_shuffle_f32x4(e[2 * j], e[2 * j + 1], 0x44),
                         _mm512_shuffle_f32x4(e[2 * j], e[2 * j + 1], 0xEE));
  }
  // HorizontalSum's first step, lane j + lane j + 4: t0..t3, then t4..t7,
  // a 128-bit block each.
  const __m512 t03 =
      _mm512_add_ps(_mm512_shuffle_f32x4(s[0], s[1], 0x88), _mm512_shuffle_f32x4(s[0], s[1], 0xDD));
  const __m512 t47 =
      _mm512_add_ps(_mm512_shuffle_f32x4(s[2], s[3], 0x88), _mm512_shuffle_f32x4(s[2], s[3], 0xDD));
  // Its second, lane 0 + lane 2 and lane 1 + lane 3: block k holds those of
  // pair k in lanes 0 and 1, of pair k + 4 in lanes 2 and 3.
  const __m512 u = _mm512_add_ps(_mm512_shuffle_ps(t03, t47, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(t03, t47, _MM_SHUFFLE(3, 2, 3, 2)));
  // Its third, lane 0 + lane 1: pair k's sum in lane 4k, pair k + 4's in
  // lane 4k + 2.
  const __m512 v = _mm512_add_ps(u, _mm512_movehdup_ps(u));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 2, 6, 10, 14, 0, 0, 0, 0, 0, 0, 0, 0);
  _mm256_storeu_ps(dots, _mm512_castps512_ps256(_mm512_permutexvar_ps(order, v)));
}

// dots[r * M + i] = the one-row kernel's dot product (Dot1 for f32,
// SplitDotBf16 for bf16) of weight row r (at w + r * in) and x row i of the M
// at x, for R = 1 or 2 weight rows. Two rows prefetch both rows' weights to
// come (PrefetchRowStreams).
template <int R, int M, typename T>
inline void WideTile(const T* w, int64_t in, const float* x, float* dots) {
  WideSums<R, M> z;
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if constexpr (R == kRows) PrefetchRowStreams(w, in, k);
    __m512 wp[R], wq[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r)
      WideBlock(w + r * in + k, &wp[r], &wq[r]);
    z.Add(wp, wq, x + k, in);
  }
  if constexpr (R == kRows && M == kMaxX) {
    if (k == in) return FinishFullTile<T>(z, dots);
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
    Sums<M> s = z.template Narrow<T>(r);
    const T* wr = w + r * in;
    s.Finish(wr, in, x, AddRemainder(wr, in, x, k, s), dots + r * M);
  }
}

// Weight rows [r, r + R) at wr against x rows [i, i + M).
template <int R, int M, typename T>
inline void StoreWideTile(const T* wr, int64_t in, int64_t out, const float* x, int64_t i,
                          const float* bias, float* y, int64_t r) {
  float dots[R * M];
  WideTile<R, M>(wr, in, x + i * in, dots);
  for (int q = 0; q < R; ++q) {
    for (int j = 0; j < M; ++j)
      Store(y, out, bias, i + j, r + q, dots[q * M + j]);
  }
}

// Weight rows [r, r + R) at wr against all m x rows, four at a time (the last
// one to three together).
template <int R, typename T>
inline void WideRows(const T* wr, int64_t in, int64_t out, const float* x, int64_t m,
                     const float* bias, float* y, int64_t r) {
  int64_t i = 0;
  for (; i + kMaxX <= m; i += kMaxX)
    StoreWideTile<R, kMaxX>(wr, in, out, x, i, bias, y, r);
  switch (m - i) {
    case 3:
      StoreWideTile<R, 3>(wr, in, out, x, i, bias, y, r);
      break;
    case 2:
      StoreWideTile<R, 2>(wr, in, out, x, i, bias, y, r);
      break;
    case 1:
      StoreWideTile<R, 1>(wr, in, out, x, i, bias, y, r);
      break;
    default:
      break;
  }
}

// Weight rows two at a time, an odd last one alone, against every x row; up
// to kMaxOneRowX x rows, MatRows instead (the AVX2 table's x layout, which
// PrepareBf16RowsAvx512 gives those).
template <typename T>
inline void MatRowsWide(const T* w, int64_t in, int64_t out, const float* x, int64_t m,
                        const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  if (m <= kMaxOneRowX<T>) return MatRows(w, in, out, x, m, bias, y, row_begin, row_end);
  int64_t r = row_begin;
  for (; r + kRows <= row_end; r += kRows)
    WideRows<kRows>(w + r * in, in, out, x, m, bias, y, r);
  if (r < row_end) WideRows<1>(w + r * in, in, out, x, m, bias, y, r);
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

// For one or two rows (the one-row tiles, and the matvec) x as the AVX2 table
// lays it out: per 16 elements, the 8 even ones, then the 8 odd ones. For
// the 512-bit tiles, per 32-element block: the even elements of its first
// 16, the even ones of its second 16 (facing WideBlock's p), then the odd
// ones of each (facing q). A last 16 and the tail are laid out as for the
// one-row tiles, since the tiles end as the one-row kernel does
// (AddRemainder, AddTail).
void PrepareBf16RowsAvx512(const float* x, int64_t m, int64_t in, float* prepared) {
  const bool wide = m > kMaxOneRowX<uint16_t>;
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * in;
    float* pr = prepared + i * in;
    int64_t k = 0;
    if (wide) {
      for (; k + 32 <= in; k += 32) {
        SplitEvenOdd16(xr + k, pr + k, pr + k + 16);
        SplitEvenOdd16(xr + k + 16, pr + k + 8, pr + k + 24);
      }
    }
    PrepareBf16X(xr + k, in - k, pr + k);
  }
}

}  // namespace medq::engine::kernels

#pragma GCC diagnostic pop
