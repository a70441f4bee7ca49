// The one-row matrows kernels (dense_kernels.h) as templates: the building
// blocks the AVX-512 table's two-row tiles end with, and its kernels for up
// to kMaxOneRowX x rows (dense_kernels_rows_avx512.cc), in 256-bit registers.
// They compute every result bitwise as that table's one-row kernels do (Dot1,
// SplitDotBf16 in dense_kernels_avx2.cc). The AVX2 table keeps two sums a dot
// product instead, and passes of its own (dense_kernels_rows_avx2.cc). Like
// avx2_common.h, everything here has internal linkage, so that no copy built
// for one instruction set can be picked by the linker for another.
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
// Why these tiles: a tile walks its weight row front to back in the one-row
// kernel's order, so the first tile of a row streams it from memory as the
// one-row kernel does (sequential streams, which the hardware prefetcher
// follows best) and every later tile finds it in L1. Past that, a tile is
// bound by its loads and its instruction count: one weight row and two x
// rows (8 accumulators) load 1.5 vectors an FMA, which is what AVX2's 16
// registers hold. Measured and not kept with AVX2: tiles of three or four x
// rows, and of four weight rows and one x row; the earlier layout (2 x 4
// tiles, one accumulator class a pass over the row) cost 2 to 2.8 times one
// row at four x rows. (Since then the AVX2 table's passes of four x rows,
// with two sums a dot product, replaced these tiles there.)
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

template <typename T>
inline void Prefetch(const T* at) {
  PrefetchAt(at, kPrefetchBytes);
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

// Sixteen bf16 weights at w as floats, split as SplitDotBf16 splits them: a
// 32-bit lane j holds element 2j in its low half and 2j + 1 in its high
// half, so a shift gives the even elements and a mask the odd ones.
inline void SplitBf16(const uint16_t* w, __m256* even, __m256* odd) {
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w));
  *even = _mm256_castsi256_ps(_mm256_slli_epi32(raw, 16));
  *odd = _mm256_castsi256_ps(_mm256_and_si256(raw, _mm256_set1_epi32(kBf16HighHalf)));
}

// Sixteen bf16 weights at w against the M x rows at x (row stride in, laid
// out by PrepareBf16X): the even products into `even`, the odd into `odd`.
template <int M>
inline void AddSplit(const uint16_t* w, int64_t in, const float* x, __m256* even, __m256* odd) {
  __m256 we, wo;
  SplitBf16(w, &we, &wo);
  for (int i = 0; i < M; ++i)
    even[i] = _mm256_fmadd_ps(we, _mm256_loadu_ps(x + i * in), even[i]);
  for (int i = 0; i < M; ++i)
    odd[i] = _mm256_fmadd_ps(wo, _mm256_loadu_ps(x + i * in + 8), odd[i]);
}

// What a one-row kernel adds after its 32-element blocks, from k: f32 (Dot1)
// the remaining 8-wide groups into a; bf16 (SplitDotBf16) a remaining 16
// into a and b. Returns where the scalar tail starts.
template <int M>
inline int64_t AddRemainder(const float* w, int64_t in, const float* x, int64_t k, Sums<M>& s) {
  for (; k + 8 <= in; k += 8) {
    const __m256 w0 = _mm256_loadu_ps(w + k);
    for (int i = 0; i < M; ++i)
      s.a[i] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i * in + k), s.a[i]);
  }
  return k;
}
template <int M>
inline int64_t AddRemainder(const uint16_t* w, int64_t in, const float* x, int64_t k, Sums<M>& s) {
  if (k + 16 > in) return k;
  AddSplit<M>(w + k, in, x + k, s.a, s.b);
  return k + 16;
}

// f32: dots[i] = Dot1(w, x row i) for the M x rows at x (row stride in).
template <int M, bool kPrefetch>
inline void Row(const float* w, int64_t in, const float* x, float* dots) {
  Sums<M> s;
  auto& [a, b, c, d] = s;
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if constexpr (kPrefetch) {
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
  s.Finish(w, in, x, AddRemainder(w, in, x, k, s), dots);
}

// bf16 (x rows laid out by PrepareBf16X): dots[i] = SplitDotBf16(w, x row i).
template <int M, bool kPrefetch>
inline void Row(const uint16_t* w, int64_t in, const float* x, float* dots) {
  Sums<M> s;
  int64_t k = 0;
  for (; k + 32 <= in; k += 32) {
    if constexpr (kPrefetch) {
      Prefetch(w + k);
    } else {
      PrefetchStreamBlock(w + k);
    }
    AddSplit<M>(w + k, in, x + k, s.a, s.b);
    AddSplit<M>(w + k + 16, in, x + k + 16, s.c, s.d);
  }
  s.Finish(w, in, x, AddRemainder(w, in, x, k, s), dots);
}

// The first tile of a row (x rows from i == 0) streams it: f32 without
// software prefetch (the hardware prefetcher follows its huge pages;
// prefetching there too measured slower at two x rows), bf16 16 KiB ahead
// as the matvec does (PrefetchStreamBlock). The later ones, which find the
// row in L1, prefetch the rows to come.
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

}  // namespace
}  // namespace medq::engine::kernels
