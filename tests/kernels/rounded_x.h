// x rounded to int8 in blocks of 32, as dense_kernels.h documents it for the
// int4 and int8 products (PrepareI4Rows, PrepareI8Rows), written here from the
// text for the kernel tests: d = amax / 127 and xq = x · (127 / amax)
// rounded to nearest even (float32 arithmetic), d = 0 and xq = 0 for amax <
// 1e-30; blocks from each row's start, the last as short as the row leaves
// it.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

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

}  // namespace medq::engine::rounded_x
