// Weight-only int8 quantization of a decoder's projection matrices (issue 44,
// LoadOptions::quantize): symmetric, one float32 scale per output row.
//
// For a row w[r, :] the scale is s = max_k |w[r, k]| / 127 (rounded to
// float32), and q[r, k] = round(w[r, k] / s), in [-127, 127] (-128 unused, so
// the range is symmetric; a row of zeros gets s = 0 and q = 0). Dequantized,
// w ≈ q · s with |w - q · s| <= s / 2 for every element. The CPU kernels read
// q and multiply each row's float32 dot product by s once
// (kernels/dense_kernels.h, MatVecI8Fn).
//
// Which matrices: every linear projection of every layer (the stacked q/k/v
// and gate/up, o_proj, down_proj). The embeddings, lm_head, the norms and the
// biases stay in the model's weight (or compute) dtype.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "common/result.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// "none" or "int8" -> the Quantization. "int4" is reserved: INVALID_REQUEST
// "not supported yet"; any other name INVALID_REQUEST listing the values.
Result<Quantization> ParseQuantization(const std::string& name);

// "none" or "int8".
const char* QuantizationName(Quantization q);

// w [out, in] (float32, bf16 or fp16, on the CPU) quantized: values int8
// [out, in] and scales float32 [out], new contiguous CPU tensors (values from
// 2 MiB up on huge pages: host_memory.h). Computed in double, so the bound
// |w - q · s| <= s / 2 holds up to double rounding. Throws what allocation
// throws.
struct QuantizedRows {
  at::Tensor values;  // int8 [out, in]
  at::Tensor scales;  // float32 [out]
};
QuantizedRows QuantizeRowsInt8(const at::Tensor& w);

// values · diag(scales) as float32 [out, in] (each element float(q) · s, one
// rounding): what the kernels multiply by, for tests and references.
at::Tensor DequantizeRowsInt8(const at::Tensor& values, const at::Tensor& scales);

// Replaces every layer's qkv_proj, o_proj, gate_up_proj and down_proj of `w`
// (CPU) by its int8 values, sets the matching *_scale tensors, re-points the
// row views (q_proj .. up_proj) at the int8 stacks and drops any packed bf16
// copies. Either every matrix is replaced or, when an allocation throws, `w`
// is left as it was: the caller gets a whole model or none.
void QuantizeProjections(ModelWeights& w);

}  // namespace medq::engine
