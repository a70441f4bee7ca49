#include "daemon/engine/prequantized_config.h"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "daemon/engine/config_reader.h"
#include "daemon/engine/status_macros.h"

namespace medq::engine {
namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// The first of `keys` present, read as an integer in [lo, hi] (required).
Result<int64_t> IntOf(const ConfigReader& r, std::initializer_list<const char*> keys, int64_t lo,
                      int64_t hi) {
  for (const char* key : keys) {
    if (r.Has(key)) return r.Int(key, lo, hi);
  }
  return r.Fail(*keys.begin(), "is missing");
}

// Refusal of a well-formed config medq does not load.
Error Unsupported(const std::string& source, const std::string& what) {
  return Error(ErrorCode::kInvalidRequest,
               source + ": quantization_config " + what +
                   "; medq loads 4-bit AWQ (GEMM) and GPTQ (desc_act false) checkpoints only");
}

Status ReadAwq(const ConfigReader& r, const std::string& source, PrequantizedConfig& c) {
  std::string version;
  MEDQ_ASSIGN_OR_RETURN(version, r.String("version", "gemm"));
  if (Lower(version) != "gemm") {
    return Unsupported(source, "has AWQ version '" + version +
                                   "', which packs its weights in a layout medq does not "
                                   "unpack (only GEMM)");
  }
  bool zero_point = true;
  MEDQ_ASSIGN_OR_RETURN(zero_point, r.Bool("zero_point", true));
  if (!zero_point) return Unsupported(source, "has zero_point false (AWQ without zeros)");
  c.format = PrequantizedFormat::kAwqGemm;
  c.zero_offset = 0;
  return Status::Ok();
}

Status ReadGptq(const ConfigReader& r, const std::string& source, PrequantizedConfig& c) {
  bool desc_act = false, lm_head = false;
  MEDQ_ASSIGN_OR_RETURN(desc_act, r.Bool("desc_act", false));
  if (desc_act) {
    return Unsupported(source,
                       "has desc_act true: the checkpoint quantized its inputs in activation "
                       "order (g_idx permutes each row's groups), which medq's int4 groups do "
                       "not represent; use a desc_act false export of the model");
  }
  bool sym = true;  // read for its type; both decode the same way
  MEDQ_ASSIGN_OR_RETURN(sym, r.Bool("sym", true));
  (void)sym;
  MEDQ_ASSIGN_OR_RETURN(lm_head, r.Bool("lm_head", false));
  if (lm_head) return Unsupported(source, "has lm_head true (a quantized lm_head)");
  std::string format;
  MEDQ_ASSIGN_OR_RETURN(format, r.String("checkpoint_format", "gptq"));
  if (format == "gptq") {
    c.zero_offset = 1;
  } else if (format == "gptq_v2") {
    c.zero_offset = 0;
  } else {
    return Unsupported(source, "has checkpoint_format '" + format +
                                   "', which medq does not unpack (only gptq and gptq_v2)");
  }
  c.format = PrequantizedFormat::kGptq;
  return Status::Ok();
}

}  // namespace

const char* PrequantizedName(PrequantizedFormat format) {
  switch (format) {
    case PrequantizedFormat::kAwqGemm:
      return "awq";
    case PrequantizedFormat::kGptq:
      return "gptq";
    case PrequantizedFormat::kNone:
      break;
  }
  return "none";
}

Result<PrequantizedConfig> ParsePrequantizedConfig(const nlohmann::json& config,
                                                   const std::string& source) {
  PrequantizedConfig c;
  const auto it = config.find("quantization_config");
  if (it == config.end() || it->is_null()) return c;
  const std::string field = "quantization_config";
  if (!it->is_object()) {
    return Error(ErrorCode::kInvalidRequest,
                 source + ": '" + field + "' is not an object; fix the model's config");
  }
  const ConfigReader r(*it, source + ": " + field);
  std::string method;
  MEDQ_ASSIGN_OR_RETURN(method, r.String("quant_method", ""));
  if (method != "awq" && method != "gptq") {
    return Unsupported(source, method.empty() ? std::string("names no quant_method")
                                              : "has quant_method '" + method +
                                                    "', which medq does not load (its "
                                                    "weights would be read as garbage)");
  }
  int64_t bits = 0;
  MEDQ_ASSIGN_OR_RETURN(bits, IntOf(r, {"bits", "w_bit"}, 1, 64));
  if (bits != 4) {
    return Unsupported(source, "has " + std::to_string(bits) + "-bit weights (only 4 bits)");
  }
  MEDQ_ASSIGN_OR_RETURN(c.group, IntOf(r, {"group_size", "q_group_size"}, -1, int64_t{1} << 30));
  if (c.group == 0 || (c.group != -1 && c.group % 32 != 0)) {
    return Unsupported(source, "has groups of " + std::to_string(c.group) +
                                   " weights; medq's int4 groups are 32, 64 or 128, so it "
                                   "takes a group size that is a multiple of 32, or -1");
  }
  if (method == "awq") {
    MEDQ_RETURN_IF_ERROR(ReadAwq(r, source, c));
    const auto skip = it->find("modules_to_not_convert");
    if (skip != it->end() && !skip->is_null() && !(skip->is_array() && skip->empty())) {
      return Unsupported(source,
                         "has modules_to_not_convert (some projections left unquantized), "
                         "which medq does not load");
    }
  } else {
    MEDQ_RETURN_IF_ERROR(ReadGptq(r, source, c));
  }
  return c;
}

}  // namespace medq::engine
