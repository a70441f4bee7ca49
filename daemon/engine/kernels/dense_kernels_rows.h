// The matrows kernels (dense_kernels.h) as templates, for the two files that
// compile them: dense_kernels_rows_avx2.cc (-mavx2 -mfma, 16 vector
// registers: tiles of one weight row) and dense_kernels_rows_avx512.cc
// (-mavx512f -mavx512vl as well, 32 registers: tiles of two weight rows).
// Both compute every result bitwise as the one-row kernel does (Dot1,
// SplitDotBf16 in dense_kernels_avx2.cc). Like avx2_common.h, everything here
// has internal linkage, so that no copy built for one instruction set can be
// picked by the linker for another.
//
// Why the same bits: a one-row kernel keeps four independent accumulators,
// a, b, c, d, each summing its own fixed subset of the products in k order
// (f32: the 8-wide groups at offsets 0, 8, 16, 24 of every 32 elements, plus
// the remaining 8-wide groups into a; bf16: the even and odd elements of the
// first 16 of every 32 into a and b, of the second 16 into c and d, plus a
// remaining 16 into a and b), then returns HorizontalSum((a + b) + (c + d))
// plus the scalar tail. A tile keeps those four accumulators for each pair of
// weight row and x row, and feeds each the same FMAs in the same order.
//
// Why these tiles: a tile walks its weight rows front to back in the one-row
// kernel's order, so the first tile of a row streams it from memory as the
// one-row kernel does (sequential streams, which the hardware prefetcher
// follows best) and every later tile finds it in L1. Past that, a tile is
// bound by its loads: one weight row and two x rows (8 accumulators) load
// 1.5 vectors an FMA; two weight rows and two x rows (16 accumulators, with
// each x vector kept in a register for both weight rows) load one, and were
// 1.35 times faster from L1 on the 2-core Zen 4 VM (bf16, 576 and 896
// inputs). AVX2's 16 registers cannot hold the larger tile (it spilled, and
// was slower than the small one), so it needs AVX-512VL's 32. Measured there
// too and not kept: tiles of three or four x rows, and of four weight rows
// and one x row; the earlier layout (2 x 4 tiles, one accumulator class a
// pass over the row) cost 2 to 2.8 times one row at four x rows.
#pragma once

#include <cstdint>

#include "daemon/engine/kernels/avx2_common.h"

namespace medq::engine::kernels {
namespace {

// How far ahead of the weight being read a one-row tile asks for the weights
// to come. The tiles after a row's first find the row in L1, and the hardware
// prefetcher, which follows demand misses, would idle while they compute; so
// they prefetch the cache line this far down the (contiguous) weight matrix,
// and memory keeps streaming the rows to come. Measured on the Zen 4 VM,
// 2 threads, SmolLM-135M bf16, against no software prefetch: eight x rows
// 27 to 31 ms against 34 to 39, four about the same; prefetching in the first
// tile too made two f32 rows slower (MatRows).
constexpr int64_t kPrefetchBytes = 4096;

// A prefetch never faults, so the address may lie past the matrix; it is
// computed as an integer, not as a pointer out of bounds.
template <typename T>
inline void PrefetchAt(const T* base, int64_t offset_bytes) {
  const uintptr_t at = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(offset_bytes);
  _mm_prefetch(reinterpret_cast<const char*>(at), _MM_HINT_T0);
}

template <typename T>
inline void Prefetch(const T* at) {
  PrefetchAt(at, kPrefetchBytes);
}

// For a tile of two weight rows at w (in elements each) that has reached
// element k of each: prefetches the next pair of rows (the 2 * in elements
// after this pair) at twice the pace the tile walks a row, so that by the
// tile's end the next pair is on its way. `lines` is the cache lines a row
// advances per call (one per 64 bytes of weights). Every tile of a pair does
// this, the first too: a pair's first tile reads two rows at once, which the
// hardware prefetcher followed badly (two rows of SmolLM's layers against two
// x rows, bf16, one thread: 25.5 ms without any software prefetch in the
// first tile, 10.6 ms with this, 10.0 ms for the one-row tiles).
template <typename T>
inline void PrefetchNextPair(const T* w, int64_t in, int64_t k, int lines) {
  const int64_t next = 2 * in * static_cast<int64_t>(sizeof(T));
  const int64_t walked = 2 * k * static_cast<int64_t>(sizeof(T));
  for (int q = 0; q < 2 * lines; ++q)
    PrefetchAt(w, next + walked + 64 * q);
}

// Loads eight floats into a register the compiler must keep: without the
// empty asm, GCC folds the load into every FMA that uses it, and a vector
// meant for two FMAs is read twice (the two-row tiles measured no faster
// than the one-row ones that way).
inline __m256 LoadKept(const float* p) {
  __m256 v = _mm256_loadu_ps(p);
  asm("" : "+v"(v));
  return v;
}

// The one-row kernels' four accumulators (a, b, c, d) for each of M x rows,
// zeroed.
template <int M>
struct Sums {
  __m256 a[M], b[M], c[M], d[M];

  Sums() {
    for (int i = 0; i < M; ++i) {
      a[i] = _mm256_setzero_ps();
      b[i] = _mm256_setzero_ps();
      c[i] = _mm256_setzero_ps();
      d[i] = _mm256_setzero_ps();
    }
  }

  // dots[i] = HorizontalSum((a + b) + (c + d)) of x row i plus the scalar
  // tail from k, as the one-row kernels end.
  template <typename T>
  void Finish(const T* w, int64_t in, const float* x, int64_t k, float* dots) const {
    for (int i = 0; i < M; ++i) {
      const __m256 sum = _mm256_add_ps(_mm256_add_ps(a[i], b[i]), _mm256_add_ps(c[i], d[i]));
      dots[i] = AddTail(HorizontalSum(sum), w, x + i * in, k, in);
    }
  }
};

// f32: dots[i] = Dot1(w, x row i) for the M x rows at x (row stride in).
template <int M, bool kPrefetch>
inline void Row(const float* w, int64_t in, const float* x, float* dots) {
  Sums<M> s;
  auto& [a, b, c, d] = s;
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if (kPrefetch) {
      Prefetch(w + k);
      Prefetch(w + k + 16);
    }
    const __m256 w0 = _mm256_loadu_ps(w + k);
    for (int i = 0; i < M; ++i)
      a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * in + k), a[i]);
    const __m256 w1 = _mm256_loadu_ps(w + k + 8);
    for (int i = 0; i < M; ++i)
      b[i] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i * in + k + 8), b[i]);
    const __m256 w2 = _mm256_loadu_ps(w + k + 16);
    for (int i = 0; i < M; ++i)
      c[i] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + i * in + k + 16), c[i]);
    const __m256 w3 = _mm256_loadu_ps(w + k + 24);
    for (int i = 0; i < M; ++i)
      d[i] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + i * in + k + 24), d[i]);
  }
  for (; k + 8 <= in; k += 8) {
    const __m256 w0 = _mm256_loadu_ps(w + k);
    for (int i = 0; i < M; ++i)
      a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * in + k), a[i]);
  }
  s.Finish(w, in, x, k, dots);
}

// bf16 (x rows laid out by PrepareBf16X): dots[i] = SplitDotBf16(w, x row i).
template <int M, bool kPrefetch>
inline void Row(const uint16_t* w, int64_t in, const float* x, float* dots) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  Sums<M> s;
  auto& [a, b, c, d] = s;
  // Sixteen weights at w + at: the even ones into `even`, the odd ones into
  // `odd`, against x's split halves at the same offset.
  const auto half = [&](int64_t at, __m256* even, __m256* odd) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + at));
    const __m256 we = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
    for (int i = 0; i < M; ++i)
      even[i] = _mm256_fmadd_ps(we, _mm256_loadu_ps(x + i * in + at), even[i]);
    const __m256 wo = _mm256_castsi256_ps(_mm256_and_si256(raw, high));
    for (int i = 0; i < M; ++i)
      odd[i] = _mm256_fmadd_ps(wo, _mm256_loadu_ps(x + i * in + at + 8), odd[i]);
  };
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if (kPrefetch) Prefetch(w + k);
    half(k, a, b);
    half(k + 16, c, d);
  }
  if (k + 16 <= in) {
    half(k, a, b);
    k += 16;
  }
  s.Finish(w, in, x, k, dots);
}

// f32, two weight rows (w and w + in) against two x rows: dots[0..1] are the
// first weight row's results for x rows 0 and 1, dots[2..3] the second's.
// Each vector, of x and of the weights, is loaded once for its two FMAs; the
// next pair of rows is prefetched on the way (PrefetchNextPair).
inline void RowPair(const float* w, int64_t in, const float* x, float* dots) {
  const float* w1 = w + in;
  Sums<2> s0, s1;
  // The 8-wide group at `at` into the accumulator class q0 / q1 (a, b, c or d
  // of each weight row).
  const auto group = [&](int64_t at, __m256* q0, __m256* q1) {
    const __m256 x0 = LoadKept(x + at);
    const __m256 x1 = LoadKept(x + in + at);
    const __m256 v0 = LoadKept(w + at);
    q0[0] = _mm256_fmadd_ps(v0, x0, q0[0]);
    q0[1] = _mm256_fmadd_ps(v0, x1, q0[1]);
    const __m256 v1 = LoadKept(w1 + at);
    q1[0] = _mm256_fmadd_ps(v1, x0, q1[0]);
    q1[1] = _mm256_fmadd_ps(v1, x1, q1[1]);
  };
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    PrefetchNextPair(w, in, k, 2);
    group(k, s0.a, s1.a);
    group(k + 8, s0.b, s1.b);
    group(k + 16, s0.c, s1.c);
    group(k + 24, s0.d, s1.d);
  }
  for (; k + 8 <= in; k += 8)
    group(k, s0.a, s1.a);
  s0.Finish(w, in, x, k, dots);
  s1.Finish(w1, in, x, k, dots + 2);
}

// bf16 (x rows laid out by PrepareBf16X), two weight rows against two x rows,
// dots laid out and the next pair prefetched as by the f32 RowPair.
inline void RowPair(const uint16_t* w, int64_t in, const float* x, float* dots) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const uint16_t* w1 = w + in;
  Sums<2> s0, s1;
  // Sixteen weights of each row at `at`: the even ones into e0 / e1, the odd
  // ones into o0 / o1, against x's split halves at the same offset.
  const auto half = [&](int64_t at, __m256* e0, __m256* o0, __m256* e1, __m256* o1) {
    const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + at));
    const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1 + at));
    const __m256 even0 = _mm256_castsi256_ps(_mm256_slli_epi32(r0, 16));
    const __m256 even1 = _mm256_castsi256_ps(_mm256_slli_epi32(r1, 16));
    for (int i = 0; i < 2; ++i) {
      const __m256 xe = LoadKept(x + i * in + at);
      e0[i] = _mm256_fmadd_ps(even0, xe, e0[i]);
      e1[i] = _mm256_fmadd_ps(even1, xe, e1[i]);
    }
    const __m256 odd0 = _mm256_castsi256_ps(_mm256_and_si256(r0, high));
    const __m256 odd1 = _mm256_castsi256_ps(_mm256_and_si256(r1, high));
    for (int i = 0; i < 2; ++i) {
      const __m256 xo = LoadKept(x + i * in + at + 8);
      o0[i] = _mm256_fmadd_ps(odd0, xo, o0[i]);
      o1[i] = _mm256_fmadd_ps(odd1, xo, o1[i]);
    }
  };
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    PrefetchNextPair(w, in, k, 1);
    half(k, s0.a, s0.b, s1.a, s1.b);
    half(k + 16, s0.c, s0.d, s1.c, s1.d);
  }
  if (k + 16 <= in) {
    half(k, s0.a, s0.b, s1.a, s1.b);
    k += 16;
  }
  s0.Finish(w, in, x, k, dots);
  s1.Finish(w1, in, x, k, dots + 2);
}

// The first tile of a row (x rows from i == 0) streams it without software
// prefetch (the hardware prefetcher follows it; prefetching there too
// measured slower at two x rows), the later ones, which find it in L1,
// prefetch the rows to come.
template <int M, typename T>
inline void Tile(const T* wr, int64_t in, const float* x, int64_t i, float* dots) {
  if (i == 0) {
    Row<M, false>(wr, in, x, dots);
  } else {
    Row<M, true>(wr, in, x + i * in, dots);
  }
}

// y[i * out + r] = dot + bias[r]: the matvec's own expression for the bias.
inline void Store(float* y, int64_t out, const float* bias, int64_t i, int64_t r, float dot) {
  y[i * out + r] = bias != nullptr ? dot + bias[r] : dot;
}

// One weight row at wr (row r) against every x row, two at a time, the last
// one of an odd m alone.
template <typename T>
inline void OneWeightRow(const T* wr, int64_t in, int64_t out, const float* x, int64_t m,
                         const float* bias, float* y, int64_t r) {
  float dots[2];
  int64_t i = 0;
  for (; i + 2 <= m; i += 2) {
    Tile<2>(wr, in, x, i, dots);
    Store(y, out, bias, i, r, dots[0]);
    Store(y, out, bias, i + 1, r, dots[1]);
  }
  if (i < m) {
    Tile<1>(wr, in, x, i, dots);
    Store(y, out, bias, i, r, dots[0]);
  }
}

// The AVX2 layout: for each weight row in [row_begin, row_end), every x row.
template <typename T>
inline void MatRows(const T* w, int64_t in, int64_t out, const float* x, int64_t m,
                    const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  for (int64_t r = row_begin; r < row_end; ++r)
    OneWeightRow(w + r * in, in, out, x, m, bias, y, r);
}

// The AVX-512VL layout: weight rows two at a time against x rows two at a
// time. An odd last x row runs against each of the two weight rows alone
// (that row is then read from L1), and an odd last weight row as in MatRows.
template <typename T>
inline void MatRowsPaired(const T* w, int64_t in, int64_t out, const float* x, int64_t m,
                          const float* bias, float* y, int64_t row_begin, int64_t row_end) {
  int64_t r = row_begin;
  for (; r + 2 <= row_end; r += 2) {
    const T* wr = w + r * in;
    float dots[4];
    int64_t i = 0;
    for (; i + 2 <= m; i += 2) {
      RowPair(wr, in, x + i * in, dots);
      Store(y, out, bias, i, r, dots[0]);
      Store(y, out, bias, i + 1, r, dots[1]);
      Store(y, out, bias, i, r + 1, dots[2]);
      Store(y, out, bias, i + 1, r + 1, dots[3]);
    }
    if (i < m) {
      for (int64_t q = 0; q < 2; ++q) {
        Tile<1>(wr + q * in, in, x, i, dots);
        Store(y, out, bias, i, r + q, dots[0]);
      }
    }
  }
  if (r < row_end) OneWeightRow(w + r * in, in, out, x, m, bias, y, r);
}

}  // namespace
}  // namespace medq::engine::kernels
