#include "daemon/engine/kernels/device_linear.h"

#include <vector>

#include "daemon/engine/torch_version.h"

#if MEDQ_WITH_CUDA
#include <c10/cuda/CUDAStream.h>

#include "daemon/engine/cuda/quantized_kernels.h"
#endif

namespace medq::engine::kernels {
namespace {

// x's shape with the last dimension `out`.
[[maybe_unused]] std::vector<int64_t> WithLast(const torch::Tensor& x, int64_t out) {
  std::vector<int64_t> shape = x.sizes().vec();
  shape.back() = out;
  return shape;
}

#if MEDQ_WITH_CUDA
cuda::ElementType ElementTypeOf(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kBFloat16:
      return cuda::ElementType::kBFloat16;
    case torch::kHalf:
      return cuda::ElementType::kHalf;
    default:
      return cuda::ElementType::kFloat;
  }
}
#endif

}  // namespace

bool IsDeviceInt8(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scale) {
  return x.is_cuda() && weight.is_cuda() && scale.defined() && scale.is_cuda() &&
         weight.scalar_type() == torch::kChar && weight.dim() == 2 && weight.is_contiguous() &&
         scale.scalar_type() == torch::kFloat && scale.dim() == 1 && scale.is_contiguous() &&
         scale.size(0) == weight.size(0) && x.size(-1) == weight.size(1) &&
         (x.scalar_type() == torch::kFloat || x.scalar_type() == torch::kBFloat16 ||
          x.scalar_type() == torch::kHalf);
}

torch::Tensor DeviceInt8Linear(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& scale, const torch::Tensor& bias) {
  const int64_t n = weight.size(0), k = weight.size(1);
  const torch::Tensor xc = x.contiguous();
  const int64_t m = xc.numel() / k;
  const torch::Tensor b = bias.defined() ? bias.to(x.scalar_type()).contiguous() : torch::Tensor();
#if MEDQ_WITH_CUDA
  const cuda::ElementType type = ElementTypeOf(xc);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(x.device().index()).stream();
  if (cuda::GemvInt8Applies(xc.data_ptr(), weight.data_ptr(), m, k, type)) {
    torch::Tensor y = torch::empty(WithLast(x, n), xc.options());
    const cudaError_t e = cuda::GemvInt8(
        xc.data_ptr(), weight.data_ptr<int8_t>(), scale.data_ptr<float>(),
        b.defined() ? b.data_ptr() : nullptr, nullptr, y.data_ptr(), m, n, k, type, stream);
    TORCH_CHECK(e == cudaSuccess, "int8 GEMV: ", cudaGetErrorString(e));
    return y;
  }
  torch::Tensor w = torch::empty({n, k}, xc.options());
  const cudaError_t e = cuda::DequantizeInt8(weight.data_ptr<int8_t>(), scale.data_ptr<float>(),
                                             w.data_ptr(), n, k, type, stream);
  TORCH_CHECK(e == cudaSuccess, "int8 dequantize: ", cudaGetErrorString(e));
  return b.defined() ? at::linear(xc, w, b) : at::linear(xc, w);
#else
  (void)m;
  (void)n;
  (void)b;
  (void)scale;
  TORCH_CHECK(false, "int8 weights on a CUDA device need a CUDA build");
#endif
}

bool IsTorchInt4(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& scale) {
  if (!scale.defined() || scale.dim() != 3 || scale.size(2) != 2 || !scale.is_contiguous() ||
      !weight.is_contiguous() || x.dim() < 1 || x.device() != weight.device() ||
      scale.device() != weight.device()) {
    return false;
  }
  if (weight.is_cuda()) {
    return weight.scalar_type() == torch::kInt && weight.dim() == 4 &&
           scale.scalar_type() == torch::kBFloat16 && scale.size(1) == 8 * weight.size(0);
  }
  return weight.scalar_type() == torch::kByte && weight.dim() == 2 &&
         scale.scalar_type() == torch::kFloat && x.scalar_type() == torch::kFloat &&
         scale.size(1) == weight.size(0) && x.size(-1) == 2 * weight.size(1);
}

torch::Tensor TorchInt4Linear(const torch::Tensor& x, const torch::Tensor& weight,
                              const torch::Tensor& scale, const torch::Tensor& bias) {
#if MEDQ_TORCH_AT_LEAST(2, 6)
  const int64_t in = x.size(-1), out = scale.size(1);
  const int64_t group = in / scale.size(0);
  const torch::Tensor rows = x.reshape({-1, in});
  torch::Tensor y;
  if (weight.is_cuda()) {
    y = at::_weight_int4pack_mm(rows.to(torch::kBFloat16).contiguous(), weight, group, scale)
            .to(x.scalar_type());
  } else {
    y = at::_weight_int4pack_mm_for_cpu(rows.contiguous(), weight, group, scale);
  }
  if (bias.defined()) y.add_(bias.to(y.scalar_type()));
  return y.view(WithLast(x, out));
#else
  (void)x;
  (void)weight;
  (void)scale;
  (void)bias;
  TORCH_CHECK(false, "LibTorch's int4 layout needs LibTorch 2.6 or later");
#endif
}

}  // namespace medq::engine::kernels
