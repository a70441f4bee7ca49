// The vocabulary matrices (the input embeddings, embed_tokens, and the output
// ones, lm_head) held quantized: LoadOptions::quantize_embeddings, off by
// default, applied with the projections' format (quantize.h: int8 rows or
// int4 groups).
//
// Why: lm_head is read in full every token like a projection, and on a
// small model it is most of the bytes left after the projections are
// quantized (Qwen2.5-0.5B, tied: 272 of 474 MB at int4), so it bounds the
// decode speed quantization can give (bench/engine/README.md). The input
// embeddings cost memory, not bandwidth: a token reads one row.
//
// Tied models (lm_head the same tensor as embed) quantize the one shared
// matrix once, for both uses: a quantized copy for the output beside a
// full-precision one for the input would cost memory instead of saving it.
// An untied model's embed is quantized too (its bytes are the other half of
// a 7B model's vocabulary matrices: 262 MB in bf16 for Mistral-7B, 74 MB in
// int4), so that the switch means one thing for both. An input row is
// dequantized when it is looked up (each element as the kernels dequantize
// it: q · s, or fma(q, s, m)), so the decode step, prefill and the batch see
// the same row, and the model's first hidden state carries the format's
// error (|w - w'| <= s / 2, quantize.h) like every projection's output does.
#pragma once

#include <ATen/ATen.h>

#include "daemon/engine/model.h"

namespace medq::engine {

// Replaces `w.embed` and `w.lm_head` (CPU, 2-D, in the weight dtype) by
// their int8 or int4 values (`q`, not kNone; int4 in groups of `group`,
// which must divide the hidden size: CheckInt4Groups has accepted the
// projections, whose input width it is) and sets embed_scale and
// lm_head_scale. A tied pair stays one tensor (quantized once). Either both
// are replaced or, when an allocation throws, `w` is left as it was.
void QuantizeEmbeddings(ModelWeights& w, Quantization q, int64_t group);

// The input embeddings of `ids` (int64, any shape [...]) as `m`'s compute
// dtype [..., hidden] on m's device: at::embedding of the matrix, or, when it
// is quantized, its rows gathered and dequantized (float32 q · s for int8,
// fma(q, s, m) for int4, then the compute dtype). Throws what LibTorch
// throws.
at::Tensor EmbedTokens(const Model& m, const at::Tensor& ids);

// One row of the input embeddings as float32, for the CPU decode step: row
// `id` of a float32, bf16, int8 or int4 `embed` (with its `scale`, the
// int8 row scales or int4 group parameters; undefined otherwise) into
// out[hidden], each element what EmbedTokens gives on the CPU, bitwise.
// Preconditions: `embed` contiguous on the CPU, id in [0, vocab).
void EmbeddingRowInto(const at::Tensor& embed, const at::Tensor& scale, int64_t id, float* out);

}  // namespace medq::engine
