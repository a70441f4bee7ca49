#include "daemon/engine/argmax.h"

#include <cmath>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace medq::engine {
namespace {

// The largest number in p[0, n) (NaN ignored; -inf if there is none), and
// whether p holds a NaN.
struct Scan {
  float largest = -INFINITY;
  bool nan = false;
};

Scan ScanRow(const float* p, int64_t n) {
  Scan s;
  int64_t i = 0;
#if defined(__SSE2__)
  // Four independent maxima of four lanes: maxps(v, m) keeps m where v is
  // NaN, and cmpunord marks the NaN lanes.
  __m128 m[4], nan = _mm_setzero_ps();
  for (__m128& v : m)
    v = _mm_set1_ps(-INFINITY);
  for (; i + 16 <= n; i += 16) {
    for (int j = 0; j < 4; ++j) {
      const __m128 v = _mm_loadu_ps(p + i + 4 * j);
      m[j] = _mm_max_ps(v, m[j]);
      nan = _mm_or_ps(nan, _mm_cmpunord_ps(v, v));
    }
  }
  float lanes[16];
  for (int j = 0; j < 4; ++j)
    _mm_storeu_ps(lanes + 4 * j, m[j]);
  for (const float v : lanes)
    s.largest = v > s.largest ? v : s.largest;
  s.nan = _mm_movemask_ps(nan) != 0;
#endif
  for (; i < n; ++i) {
    s.largest = p[i] > s.largest ? p[i] : s.largest;
    s.nan = s.nan || std::isnan(p[i]);
  }
  return s;
}

// The first i in [0, n) with p[i] == value, or with p[i] NaN when nan; -1 if
// there is none.
int64_t FindFirst(const float* p, int64_t n, float value, bool nan) {
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128 want = _mm_set1_ps(value);
  for (; i + 4 <= n; i += 4) {
    const __m128 v = _mm_loadu_ps(p + i);
    const int hits = _mm_movemask_ps(nan ? _mm_cmpunord_ps(v, v) : _mm_cmpeq_ps(v, want));
    if (hits != 0) return i + __builtin_ctz(static_cast<unsigned>(hits));
  }
#endif
  for (; i < n; ++i) {
    if (nan ? std::isnan(p[i]) : p[i] == value) return i;
  }
  return -1;
}

}  // namespace

int64_t Argmax(const at::Tensor& row) {
  if (!row.device().is_cpu() || row.scalar_type() != at::kFloat || row.dim() != 1 ||
      !row.is_contiguous()) {
    return row.argmax().item<int64_t>();
  }
  const float* p = row.data_ptr<float>();
  const int64_t n = row.numel();
  const Scan s = ScanRow(p, n);
  // Found in every row: a row without NaN holds its largest number.
  return FindFirst(p, n, s.largest, s.nan);
}

}  // namespace medq::engine
