// x rounded to int8 in blocks of 32, as dense_kernels.h documents it for the
// int4 and int8 products (PrepareI4Rows, PrepareI8Rows), written here from the
// text for the kernel tests: d = amax / 127 and xq = x · (127 / amax)
// rounded to nearest even (float32 arithmetic), d = 0 and xq = 0 for amax <
// 1e-30. The int4 products' blocks are contiguous, from each row's start,
// the last as short as the row leaves it; the int8 products' block l of
// span S is the values at 512S + 64c + 4l + u (c < 8, u < 4) below in.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace medq::engine::rounded_x {

struct QuantizedBlock {
  float d = 0.0f;
  int values[32] = {};
};

// The n <= 32 finite values at x.
inline QuantizedBlock QuantizeBlock(const float* x, int64_t n) {
  QuantizedBlock b;
  float amax = 0.0f;
  for (int64_t t = 0; t < n; ++t)
    amax = std::max(amax, std::fabs(x[t]));
  if (amax < 1e-30f) return b;
  b.d = amax / 127.0f;
  const float id = 127.0f / amax;
  for (int64_t t = 0; t < n; ++t)
    b.values[t] = static_cast<int>(std::nearbyint(x[t] * id));
  return b;
}

// x [..., in] as the products read it: d · xq, in double.
inline torch::Tensor QuantizedXDouble(const torch::Tensor& x) {
  const torch::Tensor xc = x.reshape({-1, x.size(-1)}).contiguous();
  torch::Tensor out = torch::empty(xc.sizes(), torch::kDouble);
  const int64_t rows = xc.size(0), in = xc.size(1);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t k0 = 0; k0 < in; k0 += 32) {
      const int64_t n = std::min<int64_t>(32, in - k0);
      const QuantizedBlock q = QuantizeBlock(xc.data_ptr<float>() + i * in + k0, n);
      for (int64_t t = 0; t < n; ++t)
        out.data_ptr<double>()[i * in + k0 + t] = static_cast<double>(q.d) * q.values[t];
    }
  }
  return out.view(x.sizes());
}

// The positions of the int8 products' block l of span `span` in a row of in.
inline std::vector<int64_t> SpanBlock(int64_t in, int64_t span, int64_t l) {
  std::vector<int64_t> at;
  for (int64_t c = 0; c < 8; ++c) {
    for (int64_t u = 0; u < 4; ++u) {
      const int64_t k = 512 * span + 64 * c + 4 * l + u;
      if (k < in) at.push_back(k);
    }
  }
  return at;
}

// The int8 products' block l of span `span` of the row at x, rounded.
inline QuantizedBlock QuantizeSpanBlock(const float* x, int64_t in, int64_t span, int64_t l) {
  const std::vector<int64_t> at = SpanBlock(in, span, l);
  float values[32];
  for (size_t t = 0; t < at.size(); ++t)
    values[t] = x[at[t]];
  return QuantizeBlock(values, static_cast<int64_t>(at.size()));
}

// x [..., in] as the int8 products read it: d · xq, in double.
inline torch::Tensor QuantizedXDoubleInt8(const torch::Tensor& x) {
  const torch::Tensor xc = x.reshape({-1, x.size(-1)}).contiguous();
  torch::Tensor out = torch::empty(xc.sizes(), torch::kDouble);
  const int64_t rows = xc.size(0), in = xc.size(1);
  for (int64_t i = 0; i < rows; ++i) {
    const float* xi = xc.data_ptr<float>() + i * in;
    for (int64_t span = 0; 512 * span < in; ++span) {
      for (int64_t l = 0; l < 16; ++l) {
        const std::vector<int64_t> at = SpanBlock(in, span, l);
        const QuantizedBlock q = QuantizeSpanBlock(xi, in, span, l);
        for (size_t t = 0; t < at.size(); ++t)
          out.data_ptr<double>()[i * in + at[t]] = static_cast<double>(q.d) * q.values[t];
      }
    }
  }
  return out.view(x.sizes());
}

}  // namespace medq::engine::rounded_x
