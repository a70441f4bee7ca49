#include "daemon/engine/kernels/linear.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "daemon/engine/kernels/cpu_features.h"
#include "daemon/engine/kernels/dense_kernels.h"

namespace medq::engine {
namespace {

// Below this many weight bytes per thread, waking another thread costs more
// than it saves (measured with bench/kernels; see its README).
constexpr int64_t kMinWeightBytesPerThread = 64 * 1024;

torch::Tensor BaselineLinear(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias) {
  // Correct for every device and dtype. Weights of another dtype than x are
  // converted per call, which is slow but exact.
  const torch::Tensor w =
      weight.scalar_type() == x.scalar_type() ? weight : weight.to(x.scalar_type());
  if (!bias.defined()) return at::linear(x, w);
  const torch::Tensor b = bias.scalar_type() == x.scalar_type() ? bias : bias.to(x.scalar_type());
  return at::linear(x, w, b);
}

bool IsCpuFloatOrBf16(const torch::Tensor& t) {
  return t.device().is_cpu() &&
         (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16);
}

bool NeedsAutograd(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (!at::GradMode::is_enabled()) return false;
  return x.requires_grad() || weight.requires_grad() || (bias.defined() && bias.requires_grad());
}

// Output rows per task so that each task reads at least
// kMinWeightBytesPerThread of weights.
int64_t GrainRows(int64_t in, size_t element_size) {
  const int64_t row_bytes = std::max<int64_t>(1, in * static_cast<int64_t>(element_size));
  return std::max<int64_t>(1, kMinWeightBytesPerThread / row_bytes);
}

std::vector<int64_t> OutputSizes(const torch::Tensor& x, int64_t out) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() = out;
  return sizes;
}

// Bias as a contiguous float32 buffer, or undefined.
torch::Tensor FloatBias(const torch::Tensor& bias) {
  if (!bias.defined()) return bias;
  return bias.to(torch::kFloat).contiguous();
}

torch::Tensor MatVec(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  const int64_t out = weight.size(0);
  const int64_t in = weight.size(1);
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor b = FloatBias(bias);
  torch::Tensor y = torch::empty(OutputSizes(x, out), x.options());
  const float* xp = xc.data_ptr<float>();
  const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  const kernels::DenseKernels& k = kernels::ActiveKernels();
  const int64_t grain = GrainRows(in, weight.element_size());
  if (weight.scalar_type() == torch::kFloat) {
    const float* wp = weight.data_ptr<float>();
    at::parallel_for(0, out, grain, [&](int64_t begin, int64_t end) {
      k.matvec_f32(wp, in, xp, bp, yp, begin, end);
    });
  } else {
    const auto* wp = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
    at::parallel_for(0, out, grain, [&](int64_t begin, int64_t end) {
      k.matvec_bf16(wp, in, xp, bp, yp, begin, end);
    });
  }
  return y;
}

torch::Tensor MatMulBf16(const torch::Tensor& x, const torch::Tensor& weight,
                         const torch::Tensor& bias) {
  const int64_t out = weight.size(0);
  const int64_t in = weight.size(1);
  const int64_t m = x.numel() / in;
  const torch::Tensor xc = x.reshape({m, in}).contiguous();
  const torch::Tensor b = FloatBias(bias);
  torch::Tensor y = torch::empty(OutputSizes(x, out), x.options());
  const float* xp = xc.data_ptr<float>();
  const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  const auto* wp = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  const kernels::DenseKernels& k = kernels::ActiveKernels();
  const int64_t grain = std::max(kernels::kBf16RowBlock, GrainRows(in, weight.element_size()));
  at::parallel_for(0, out, grain, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(static_cast<size_t>(kernels::kBf16RowBlock * in));
    k.matmul_bf16(wp, in, out, xp, m, bp, yp, begin, end, scratch.data());
  });
  return y;
}

}  // namespace

LinearPath SelectLinearPath(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias) {
  if (!x.defined() || !weight.defined()) return LinearPath::kBaseline;
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat || x.dim() < 1) {
    return LinearPath::kBaseline;
  }
  if (!IsCpuFloatOrBf16(weight) || weight.dim() != 2 || !weight.is_contiguous()) {
    return LinearPath::kBaseline;
  }
  const int64_t out = weight.size(0);
  const int64_t in = weight.size(1);
  if (in == 0 || out == 0 || x.size(-1) != in || x.numel() == 0) return LinearPath::kBaseline;
  if (bias.defined() && (!IsCpuFloatOrBf16(bias) || bias.dim() != 1 || bias.size(0) != out)) {
    return LinearPath::kBaseline;
  }
  if (NeedsAutograd(x, weight, bias)) return LinearPath::kBaseline;
  const bool bf16 = weight.scalar_type() == torch::kBFloat16;
  if (x.numel() == in) return bf16 ? LinearPath::kMatVecBf16 : LinearPath::kMatVecF32;
  return bf16 ? LinearPath::kMatMulBf16 : LinearPath::kGemmF32;
}

const char* LinearPathName(LinearPath path) {
  switch (path) {
    case LinearPath::kBaseline:
      return "baseline";
    case LinearPath::kGemmF32:
      return "gemm_f32";
    case LinearPath::kMatVecF32:
      return "matvec_f32";
    case LinearPath::kMatVecBf16:
      return "matvec_bf16";
    case LinearPath::kMatMulBf16:
      return "matmul_bf16";
  }
  return "unknown";
}

torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight,
                     const torch::Tensor& bias) {
  switch (SelectLinearPath(x, weight, bias)) {
    case LinearPath::kMatVecF32:
    case LinearPath::kMatVecBf16:
      return MatVec(x, weight, bias);
    case LinearPath::kMatMulBf16:
      return MatMulBf16(x, weight, bias);
    case LinearPath::kGemmF32:
      return bias.defined() ? at::linear(x, weight, bias.to(torch::kFloat)) : at::linear(x, weight);
    case LinearPath::kBaseline:
      break;
  }
  return BaselineLinear(x, weight, bias);
}

}  // namespace medq::engine
