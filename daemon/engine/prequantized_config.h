// config.json's quantization_config: which pre-quantized 4-bit checkpoint
// formats medq loads (prequantized.h unpacks them), and the clear refusal of
// every other. Free of LibTorch.
//
// Accepted:
// - AWQ, GEMM packing (quant_method "awq", version "gemm" or absent, as
//   AutoAWQ and transformers write it): bits 4, zero_point true (or absent),
//   modules_to_not_convert absent, null or empty. Zeros are stored as they
//   are: w = (q - z) · s.
// - GPTQ (quant_method "gptq", as auto-gptq, optimum and GPTQModel write
//   it): bits 4, desc_act false (or absent), sym true or false (either
//   decodes the same way: the zeros are stored explicitly), lm_head false (or
//   absent), checkpoint_format "gptq" (or absent: auto-gptq's v1, zeros
//   stored minus one, z = stored + 1, so 1..16) or "gptq_v2" (GPTQModel's
//   internal format, zeros stored as they are).
// - Group sizes (group_size, or AutoAWQ's q_group_size): any multiple of 32,
//   or -1 (one group a row). medq's int4 groups are 32, 64 or 128 weights;
//   a checkpoint group of 256 or of a whole row becomes medq groups of 128
//   repeating its scale and zero, which is exact (and costs 4 bytes a 128
//   weights).
// Refused, each INVALID_REQUEST naming config.json (the model's directory)
// and the reason: another quant_method, bits other than 4, AWQ versions
// other than GEMM (gemv, gemv_fast, marlin, exllama, ipex pack differently),
// zero_point false, GPTQ's desc_act true (its rows are permuted by g_idx),
// other checkpoint formats, a group not a multiple of 32.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"

namespace medq::engine {

enum class PrequantizedFormat { kNone, kAwqGemm, kGptq };

struct PrequantizedConfig {
  PrequantizedFormat format = PrequantizedFormat::kNone;
  // Weights a group shares a scale and zero along the input; -1: a whole row.
  int64_t group = 0;
  // What to add to a stored zero to get the zero it means (GPTQ v1: 1).
  int zero_offset = 0;
};

// "awq" or "gptq" (for messages); "none" for kNone.
const char* PrequantizedName(PrequantizedFormat format);

// Reads `config`'s quantization_config (absent or null: kNone). `source`
// names config.json in messages. Failure: INVALID_REQUEST as above.
Result<PrequantizedConfig> ParsePrequantizedConfig(const nlohmann::json& config,
                                                   const std::string& source);

}  // namespace medq::engine
