// Quantized weights on a CUDA device (issue 44): what a model quantized on
// the CPU (quantize.h) becomes when it moves to the GPU, and what it can
// hold there.
//
// A quantized model for a GPU is built and quantized in host memory, then
// moved: its full-precision projections never reach the device (a 7B model
// in bf16 is 14 GB; its int4 projections 3.7 GB). On the device:
//  - int8 projections stay as they are, int8 [out, in] with float32 row
//    scales [out]; Linear() reads them with medq's own GEMV kernel
//    (cuda/quantized_kernels.h) for up to 16 rows and dequantizes a matrix
//    for a prefill's GEMM;
//  - int4 projections become LibTorch's int4 tensor-core layout
//    (_convert_weight_to_int4pack: int32 [out / 8, in / (16 t), 32, t / 2],
//    t inner k-tiles) with scale-and-zeros bf16 [in / group, out, 2], which
//    LibTorch's _weight_int4pack_mm (tinygemm, compute capability 8.0 and
//    up) multiplies by bf16 rows. A weight dequantizes there to
//    (q - 8) · s + z; medq's fma(q, s, m) is the same weight with
//    z = m + 8 s, rounded to bf16 (one rounding of z: at most 2^-9 of |z|,
//    against the quantization's own s / 2);
//  - the embeddings and lm_head stay in the weight dtype, or with
//    quantize_embeddings go as the projections do, except that an int4 input
//    embedding keeps medq's layout (a lookup gathers its rows) beside an int4
//    lm_head in LibTorch's (a tied pair becomes two tensors); norms and
//    biases in the compute dtype.
// The same layout exists on the CPU in LibTorch 2.6 and later
// (_convert_weight_to_int4pack_for_cpu, scale-and-zeros in x's dtype):
// SetDeviceQuantizedFormOnCpu makes a CPU load take it, so that CI runs the
// conversion and the dispatch that only a GPU would otherwise run.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "common/result.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// Whether this LibTorch has the int4 ops above (2.6 and later).
bool TorchInt4Available();

// The int4 matrix `values` uint8 [out, in / 2] with `params` bf16 [out,
// in / group, 2] (quantize.h's layout) as LibTorch's int4 inputs, on the CPU:
// `codes` uint8 [out, in / 2] with weight 2j in the high nibble of byte j
// and 2j + 1 in the low one (what _convert_weight_to_int4pack takes on a
// GPU), and `scale_zeros` float32 [in / group, out, 2]: (s, m + 8 s).
struct TorchInt4Inputs {
  at::Tensor codes;
  at::Tensor scale_zeros;
};
TorchInt4Inputs TorchInt4From(const at::Tensor& values, const at::Tensor& params);

// The int4 matrix in LibTorch's layout on `device` (a GPU, or the CPU):
// `weight` and `scale` for Linear(). The CPU's form needs out % 16 == 0,
// the GPU's out % 8 == 0 (CheckDeviceQuantization says so first).
struct TorchInt4Matrix {
  at::Tensor weight;
  at::Tensor scale;
};
TorchInt4Matrix ToTorchInt4(const TorchInt4Inputs& inputs, at::Device device);

// OK when `w`'s projections, quantized as `q`, can be held on `device`
// (the CPU only where SetDeviceQuantizedFormOnCpu asked for it); otherwise
// INVALID_REQUEST naming `model` and the reason: a LibTorch without the int4
// ops, a GPU older than compute capability 8.0 for int4, a matrix whose
// rows do not fill the layout's tiles (lm_head's too with `embeddings`).
Status CheckDeviceQuantization(const ModelWeights& w, Quantization q, at::Device device,
                               bool embeddings, const std::string& model);

// Moves `w`, quantized on the CPU as `q` (QuantizeProjections), to `device`
// in the form above, the full-precision matrices (embeddings, lm_head) as
// `weight_dtype` and the norms and biases as `compute_dtype` (the device's:
// an adapted model merged in float32 on the CPU goes to a GPU in bf16).
// With kNone it moves a full-precision model as it is. The row views
// (q_proj .. up_proj) are left undefined for int4 (LibTorch's layout has no
// rows to view; an adapter never merges into a quantized model). Either
// every tensor moves or, when an allocation throws, `w` is left as it was.
void MoveQuantizedWeights(ModelWeights& w, Quantization q, at::Device device,
                          at::ScalarType weight_dtype, at::ScalarType compute_dtype);

// Whether a model quantized as `q` on `device` is held in the form above:
// on a GPU whenever it is quantized; on the CPU only int4, and only where
// SetDeviceQuantizedFormOnCpu asked for it.
bool HoldsDeviceForm(Quantization q, at::Device device);

// Whether a CPU load holds int4 weights in LibTorch's layout, as on a GPU
// (above). Test switch, off by default, process-wide.
void SetDeviceQuantizedFormOnCpu(bool enabled);
bool DeviceQuantizedFormOnCpu();

}  // namespace medq::engine
