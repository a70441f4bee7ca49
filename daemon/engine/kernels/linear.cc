#include "daemon/engine/kernels/linear.h"

#include <cstdint>
#include <vector>

#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/device_linear.h"

namespace medq::engine {
namespace {

torch::Tensor BaselineLinear(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias, const torch::Tensor& scale) {
  // Correct for every device and dtype. Weights of another dtype than x are
  // converted per call (int8 ones dequantized), which is slow but exact.
  const torch::Tensor w =
      weight.scalar_type() == torch::kByte
          ? kernels::DequantizeInt4(weight.contiguous(), scale.contiguous()).to(x.scalar_type())
      : weight.scalar_type() == torch::kChar
          ? weight.to(torch::kFloat).mul_(scale.to(torch::kFloat).unsqueeze(1)).to(x.scalar_type())
      : weight.scalar_type() == x.scalar_type() ? weight
                                                : weight.to(x.scalar_type());
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

// int8 weights the own kernels can read: [out, in] contiguous on the CPU, with
// contiguous float32 scales [out] there too.
bool IsCpuInt8(const torch::Tensor& weight, const torch::Tensor& scale) {
  return weight.device().is_cpu() && weight.scalar_type() == torch::kChar && scale.defined() &&
         scale.device().is_cpu() && scale.scalar_type() == torch::kFloat && scale.dim() == 1 &&
         scale.is_contiguous() && weight.dim() == 2 && scale.size(0) == weight.size(0) &&
         !scale.requires_grad();
}

// int4 weights the own kernels can read: uint8 [out, in / 2] contiguous on
// the CPU, with contiguous bf16 group parameters [out, groups, 2] there too,
// the group a multiple of 32 (kernels' blocks) dividing in.
bool IsCpuInt4(const torch::Tensor& weight, const torch::Tensor& scale) {
  if (!weight.device().is_cpu() || weight.scalar_type() != torch::kByte || weight.dim() != 2 ||
      !scale.defined() || !scale.device().is_cpu() || scale.scalar_type() != torch::kBFloat16 ||
      scale.dim() != 3 || !scale.is_contiguous() || scale.requires_grad() ||
      scale.size(0) != weight.size(0) || scale.size(2) != 2 || scale.size(1) == 0) {
    return false;
  }
  const int64_t in = 2 * weight.size(1);
  return in % scale.size(1) == 0 && (in / scale.size(1)) % 32 == 0;
}

}  // namespace

LinearPath SelectLinearPath(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias, const torch::Tensor& scale) {
  if (!x.defined() || !weight.defined()) return LinearPath::kBaseline;
  const bool bias_fits = !bias.defined() || (bias.dim() == 1 && bias.device() == x.device());
  if (bias_fits && !NeedsAutograd(x, weight, bias)) {
    if (kernels::IsTorchInt4(x, weight, scale)) return LinearPath::kTorchInt4;
    if (kernels::IsDeviceInt8(x, weight, scale)) return LinearPath::kDeviceInt8;
  }
  if (!x.device().is_cpu() || x.scalar_type() != torch::kFloat || x.dim() < 1) {
    return LinearPath::kBaseline;
  }
  const bool int8 = IsCpuInt8(weight, scale);
  const bool int4 = IsCpuInt4(weight, scale);
  if ((!int8 && !int4 && !IsCpuFloatOrBf16(weight)) || weight.dim() != 2 ||
      !weight.is_contiguous()) {
    return LinearPath::kBaseline;
  }
  const int64_t out = weight.size(0);
  const int64_t in = int4 ? 2 * weight.size(1) : weight.size(1);
  if (in == 0 || out == 0 || x.size(-1) != in || x.numel() == 0) return LinearPath::kBaseline;
  if (bias.defined() && (!IsCpuFloatOrBf16(bias) || bias.dim() != 1 || bias.size(0) != out)) {
    return LinearPath::kBaseline;
  }
  if (NeedsAutograd(x, weight, bias)) return LinearPath::kBaseline;
  if (int4) return LinearPath::kMatRowsInt4;
  if (int8) return LinearPath::kMatRowsInt8;
  const bool bf16 = weight.scalar_type() == torch::kBFloat16;
  if (x.numel() == in) return bf16 ? LinearPath::kMatVecBf16 : LinearPath::kMatVecF32;
  if (!bf16) return LinearPath::kGemmF32;
  return x.numel() / in >= kTiledGemmMinRows ? LinearPath::kTiledGemmBf16 : LinearPath::kMatMulBf16;
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
    case LinearPath::kTiledGemmBf16:
      return "tiled_gemm_bf16";
    case LinearPath::kMatRowsInt8:
      return "matrows_int8";
    case LinearPath::kMatRowsInt4:
      return "matrows_int4";
    case LinearPath::kDeviceInt8:
      return "device_int8";
    case LinearPath::kTorchInt4:
      return "torch_int4";
  }
  return "unknown";
}

torch::Tensor Linear(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                     const torch::Tensor& scale) {
  switch (SelectLinearPath(x, weight, bias, scale)) {
    case LinearPath::kMatRowsInt8:
      return kernels::CpuMatRowsInt8(x, weight, scale, bias);
    case LinearPath::kMatRowsInt4:
      return kernels::CpuMatRowsInt4(x, weight, scale, bias);
    case LinearPath::kDeviceInt8:
      return kernels::DeviceInt8Linear(x, weight, scale, bias);
    case LinearPath::kTorchInt4:
      return kernels::TorchInt4Linear(x, weight, scale, bias);
    case LinearPath::kMatVecF32:
    case LinearPath::kMatVecBf16:
      return kernels::CpuMatVec(x, weight, bias);
    case LinearPath::kMatMulBf16:
      return kernels::CpuMatMulBf16(x, weight, bias);
    case LinearPath::kTiledGemmBf16:
      return kernels::CpuTiledGemmBf16(x, weight, bias);
    case LinearPath::kGemmF32:
      return bias.defined() ? at::linear(x, weight, bias.to(torch::kFloat)) : at::linear(x, weight);
    case LinearPath::kBaseline:
      break;
  }
  return BaselineLinear(x, weight, bias, scale);
}

void LinearAddInto(torch::Tensor& residual, const torch::Tensor& x, const torch::Tensor& weight,
                   const torch::Tensor& bias, const torch::Tensor& scale) {
  const int64_t out = weight.size(0);
  const int64_t in = weight.scalar_type() == torch::kByte ? 2 * weight.size(1) : weight.size(1);
  const bool fusable = !at::GradMode::is_enabled() && residual.is_contiguous() &&
                       residual.scalar_type() == x.scalar_type() && residual.size(-1) == out &&
                       residual.numel() / out == x.numel() / in && !bias.defined();
  if (fusable) {
    switch (SelectLinearPath(x, weight, bias, scale)) {
      case LinearPath::kMatRowsInt4:
      case LinearPath::kMatRowsInt8:
        if (x.numel() != in) break;  // several rows: Linear, then add_
        [[fallthrough]];
      case LinearPath::kMatVecF32:
      case LinearPath::kMatVecBf16: {
        // One row: y = W x into a scratch row, then added; no ATen op at all.
        // The row is the calling thread's and only grows: no allocation per
        // token once the widest projection has run.
        thread_local std::vector<float> y;
        y.resize(static_cast<size_t>(out));
        const torch::Tensor xc = x.is_contiguous() ? x : x.contiguous();
        if (weight.scalar_type() == torch::kByte) {
          kernels::MatRowsInt4Into(weight, scale, xc.data_ptr<float>(), 1, nullptr, y.data());
        } else {
          kernels::MatVecInto(weight, xc.data_ptr<float>(), nullptr, y.data(),
                              scale.defined() ? scale.data_ptr<float>() : nullptr);
        }
        float* r = residual.data_ptr<float>();
        for (int64_t i = 0; i < out; ++i)
          r[i] += y[static_cast<size_t>(i)];
        return;
      }
      case LinearPath::kBaseline:
        if (weight.scalar_type() == x.scalar_type()) {
          residual.view({-1, out}).addmm_(x.reshape({-1, in}), weight.t());
          return;
        }
        break;
      default:
        break;
    }
  }
  torch::Tensor y = Linear(x, weight, bias, scale);
  if (at::GradMode::is_enabled()) {
    residual = residual + y;
  } else {
    residual.add_(y);
  }
}

}  // namespace medq::engine
