// Weight-only quantization of a decoder's projection matrices (issue 44,
// LoadOptions::quantize), int8 or int4.
//
// int8: symmetric, one float32 scale per output row. For a row w[r, :] the
// scale is s = max_k |w[r, k]| / 127 (rounded to float32), and q[r, k] =
// round(w[r, k] / s), in [-127, 127] (-128 unused, so the range is
// symmetric; a row of zeros gets s = 0 and q = 0). Dequantized, w ≈ q · s
// with |w - q · s| <= s / 2 for every element. The CPU kernels read q and
// multiply each row's float32 dot product by s once
// (kernels/dense_kernels.h, MatVecI8Fn).
//
// int4: asymmetric, in groups of `group` consecutive weights of a row
// (along the input; 32, 64 or 128, default kInt4DefaultGroup = 64), each
// with a bf16 scale s and minimum m: w ≈ q · s + m, q = clamp(round((w - m)
// / s), 0, 15), the nearest level of the range [m, m + 15 s]. s and m are
// chosen per group to minimise the squared error of the dequantized group
// (fma(q, s, m) in float32 from the bf16 s and m stored, as the kernels
// compute it), by a search in the manner of llama.cpp's Q4_K: candidate
// ranges of 12 to 16 steps over [min, max], each refitted by least squares
// to its codes and rounded to bf16. The full range (m the group's minimum
// rounded down to bf16, s = (max - m) / 15 rounded up: every weight
// covered, |w - (q · s + m)| <= s / 2) is always a candidate and kept
// unless another is strictly better, so every group's squared error is at
// most the full range's. Where a narrower range wins, the weights beyond it
// are clipped: each weight is within s / 2 of its dequantized value plus
// its distance outside [m, m + 15 s] (the bound tested). The search is
// deterministic; it costs a few passes over each group at load (about 2.2x
// the full range's int4 load time for Qwen2.5-0.5B, bench/engine/README.md).
// Why the search: on medq-demo it takes int4's perplexity increase at the
// default groups of 64 from +0.46 % to +0.34 %, level with llama.cpp's Q4_0
// at the same 4.5 bits a weight (bench/quality/README.md).
// Asymmetric rather than
// symmetric: all 16 levels span the group's own range, where a symmetric
// code spends levels on the side a skewed group does not reach (its step is
// max |w| / 7.5, the asymmetric one (max - min) / 15, never larger); the
// kernels dequantize with one FMA either way (q · s + m, or q · s - 8 s),
// so the minimum costs nothing there, and 2 bytes a group in memory. bf16
// rather than fp16 for s and m: the range of float32 (a scale of a tiny
// group neither underflows nor loses bits to subnormals), and float32 by a
// shift. Two weights a byte, in the kernels' blocks of 32
// (dense_kernels.h, MatVecI4Fn); the bytes of a [out, in] matrix are
// in / 2 + 4 · in / group a row, 0.28 of bf16's at groups of 64.
//
// Which matrices: every linear projection of every layer (the stacked q/k/v
// and gate/up, o_proj, down_proj). The embeddings and lm_head stay in the
// model's weight dtype unless LoadOptions::quantize_embeddings holds them in
// the same format (quantized_embeddings.h); the norms and the biases stay in
// the compute dtype.
#pragma once

#include <ATen/ATen.h>

#include <array>
#include <string>

#include "common/result.h"
#include "daemon/engine/model.h"

namespace medq::engine {

// "none", "int8" or "int4" -> the Quantization; any other name
// INVALID_REQUEST listing the values.
Result<Quantization> ParseQuantization(const std::string& name);

// "none", "int8" or "int4".
const char* QuantizationName(Quantization q);

// int4's group sizes: the default, and whether `group` is one of 32, 64, 128.
inline constexpr int64_t kInt4DefaultGroup = 64;
bool IsInt4Group(int64_t group);

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

// w [out, in] (float32, bf16 or fp16, on the CPU) quantized to int4 in
// groups of `group` (IsInt4Group, dividing in): values uint8 [out, in / 2]
// in the kernels' layout, params bf16 [out, in / group, 2] (scale, minimum),
// new contiguous CPU tensors (values from 2 MiB up on huge pages). The codes
// are computed in double from the stored (rounded) scale and minimum, so the
// bounds above hold up to float32's rounding of fma(q, s, m); a NaN weight
// becomes q = 0, and a group with one keeps the full range.
// Throws std::invalid_argument for a group outside the contract, and what
// allocation throws.
struct QuantizedGroups {
  at::Tensor values;  // uint8 [out, in / 2]
  at::Tensor params;  // bf16 [out, in / group, 2]
};
QuantizedGroups QuantizeRowsInt4(const at::Tensor& w, int64_t group);

// The codes of the int4 matrix `values` (uint8 [out, in / 2] in the kernels'
// layout) one a byte in k order, uint8 [out, in], on its device.
at::Tensor Int4Codes(const at::Tensor& values);

// The int4 matrix as float32 [out, in], each element fma(q, s, m) (one
// rounding): what the kernels multiply by, for tests and references. On
// another device than the CPU (a GPU's quantized embeddings), q · s + m.
at::Tensor DequantizeRowsInt4(const at::Tensor& values, const at::Tensor& params);

// Points a layer's row views (q_proj, k_proj, v_proj; gate_proj, up_proj:
// as many rows each as they have now) at qkv_proj and gate_up_proj.
void PointRowViews(LayerWeights& l);

// A layer's four projection stacks (qkv_proj, o_proj, gate_up_proj,
// down_proj) with their names, for the checks that name the one that fails.
struct NamedProjection {
  const char* name;
  const at::Tensor* matrix;
};
std::array<NamedProjection, 4> NamedProjections(const LayerWeights& l);

// OK when every projection of `w` can be held as int4 in groups of `group`;
// otherwise INVALID_REQUEST naming `model`, the matrix and its input width
// (or the group size, where it is not 32, 64 or 128).
Status CheckInt4Groups(const ModelWeights& w, int64_t group, const std::string& model);

// Replaces every layer's qkv_proj, o_proj, gate_up_proj and down_proj of `w`
// (CPU) by its int8 or int4 values (`q`, not kNone; int4 in groups of
// `group`, which CheckInt4Groups has accepted), sets the matching *_scale
// tensors (int8's scales, int4's group parameters), re-points the row views
// (q_proj .. up_proj) at the quantized stacks and drops any packed bf16
// copies. Either every matrix is replaced or, when an allocation throws, `w`
// is left as it was: the caller gets a whole model or none.
void QuantizeProjections(ModelWeights& w, Quantization q = Quantization::kInt8,
                         int64_t group = kInt4DefaultGroup);

}  // namespace medq::engine
