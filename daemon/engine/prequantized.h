// Pre-quantized 4-bit checkpoints (AWQ GEMM, GPTQ: prequantized_config.h)
// unpacked at load into medq's own int4 layout (quantize.h): values uint8
// [out, in / 2] in the kernels' blocks, params bf16 [out, in / group, 2]
// (scale s', minimum m'), w' = q · s' + m'. The codes q are copied as they
// are; only the scale and zero change form, and nothing is dequantized to a
// full-precision matrix on the way (a 7B model needs its int4 bytes, not its
// bf16 ones).
//
// What the checkpoint denotes, per weight: w = (q - z) · s, q in 0..15, z
// the group's zero (0..15 for AWQ, 1..16 for GPTQ's v1 format), s its fp16
// scale. medq holds s' = bf16(s) and m' = bf16(-z · s'), each rounded to
// nearest once (s and z · s' are exact in float32: 11 and 8 + 5 significant
// bits). So w' - w = (q - z)(s' - s) + (m' + z · s'), and with bf16's unit
// roundoff 2^-8:
//     |w' - w| <= 2^-8 · |s| · (|q - z| + (1 + 2^-8) · z)
// (at most 2^-8 · 32.1 · |s|, about 1/8 of a quantization step, which
// itself is s; measured on the fixtures: tests/engine/prequantized_test.cc).
// The kernels' fma(q, s', m') in float32 adds one rounding of w' (2^-24
// relative). fp16 scales would be exact, but medq's params are bf16 for
// every int4 matrix (quantize.h), and this keeps one kernel.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>

#include "common/result.h"
#include "daemon/engine/checkpoint.h"
#include "daemon/engine/model.h"
#include "daemon/engine/prequantized_config.h"

namespace medq::engine {

// medq's int4 group for a checkpoint's groups of `group` weights (-1: the
// whole row) along rows `in` wide: the largest of 128, 64, 32 that divides
// it (a checkpoint group then spans whole medq groups with its one scale
// and zero, exactly); 0 where none does.
int64_t Int4GroupFor(int64_t group, int64_t in);

// Takes layer `prefix`'s ("model.layers.N.") projections out of `tensors`,
// each as P.qweight, P.qzeros, P.scales (and GPTQ's P.g_idx, which must be
// the trivial i / group when present), and sets `layer`'s qkv_proj, o_proj,
// gate_up_proj and down_proj to their int4 values (stacked as the engine
// stacks them), the *_scale tensors to their params, and the row views
// (q_proj .. up_proj) into the stacks. CPU tensors. Failure:
// INVALID_REQUEST naming the tensor and its file: missing, of another dtype
// (qweight and qzeros int32, scales fp16, bf16 or fp32, g_idx int32 or
// int64), of a shape other than the format's for config.json's widths, a
// non-finite scale, a non-trivial g_idx, groups that do not divide a row.
Status TakeInt4Projections(std::map<std::string, CheckpointTensor>& tensors,
                           const PrequantizedConfig& format, const ModelConfig& config,
                           const std::string& prefix, LayerWeights& layer);

}  // namespace medq::engine
