#include "daemon/engine/encoder_config.h"

#include <cmath>
#include <optional>

#include <nlohmann/json.hpp>

#include "daemon/engine/model_config.h"
#include "daemon/engine/status_macros.h"

namespace medq::engine {
namespace {

using nlohmann::json;

class Fields {
 public:
  Fields(const json& j, const std::string& source) : j_(j), source_(source) {}

  Error Fail(const std::string& key, const std::string& what) const {
    return Error(ErrorCode::kInvalidRequest,
                 source_ + ": '" + key + "' " + what + "; fix the model's config");
  }
  bool Has(const std::string& key) const {
    const auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  // An integer in [lo, hi]; `fallback` when absent (nullopt: required).
  Result<int64_t> Int(const std::string& key, int64_t lo, int64_t hi,
                      std::optional<int64_t> fallback = std::nullopt) const {
    if (!Has(key)) {
      if (fallback) return *fallback;
      return Fail(key, "is missing");
    }
    const json& v = j_.at(key);
    if (!v.is_number_integer()) return Fail(key, "is not an integer");
    const int64_t x = v.get<int64_t>();
    if (x < lo || x > hi) {
      return Fail(key, "is " + std::to_string(x) + ", outside [" + std::to_string(lo) + ", " +
                           std::to_string(hi) + "]");
    }
    return x;
  }
  Result<double> Epsilon(const std::string& key, double fallback) const {
    if (!Has(key)) return fallback;
    const json& v = j_.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0 ||
        v.get<double>() > 1) {
      return Fail(key, "is not a number in (0, 1]");
    }
    return v.get<double>();
  }
  Result<std::string> String(const std::string& key, const std::string& fallback) const {
    if (!Has(key)) return fallback;
    if (!j_.at(key).is_string()) return Fail(key, "is not a string");
    return j_.at(key).get<std::string>();
  }

 private:
  const json& j_;
  const std::string& source_;
};

// The architecture: architectures[0], or model_type when there is no list.
Result<std::string> Architecture(const json& j, const std::string& source) {
  const auto it = j.find("architectures");
  if (it != j.end() && it->is_array() && !it->empty() && (*it)[0].is_string()) {
    return (*it)[0].get<std::string>();
  }
  const auto type = j.find("model_type");
  if (type != j.end() && type->is_string()) {
    if (*type == "bert") return std::string("BertModel");
    if (*type == "mpnet") return std::string("MPNetModel");
    return "model_type " + type->get<std::string>();
  }
  return Error(ErrorCode::kInvalidRequest,
               source + " names no architecture ('architectures' or 'model_type')");
}

}  // namespace

int64_t EncoderConfig::MaxSequence() const {
  return arch == EncoderArch::kMpnet ? max_position_embeddings - kMpnetPaddingIdx - 1
                                     : max_position_embeddings;
}

Result<EncoderConfig> ParseEncoderConfig(const json& j, const std::string& source) {
  if (!j.is_object()) {
    return Error(ErrorCode::kInvalidRequest, source + " is not a JSON object");
  }
  EncoderConfig c;
  MEDQ_ASSIGN_OR_RETURN(c.architecture, Architecture(j, source));
  if (c.architecture == "BertModel") {
    c.arch = EncoderArch::kBert;
  } else if (c.architecture == "MPNetModel") {
    c.arch = EncoderArch::kMpnet;
  } else {
    return Error(ErrorCode::kInvalidRequest,
                 source + ": architecture '" + c.architecture +
                     "' is not supported for embeddings; supported: BertModel, MPNetModel");
  }
  const Fields f(j, source);
  constexpr int64_t kBig = int64_t{1} << 24;
  const bool bert = c.arch == EncoderArch::kBert;
  MEDQ_ASSIGN_OR_RETURN(c.vocab_size, f.Int("vocab_size", 1, kBig));
  MEDQ_ASSIGN_OR_RETURN(c.hidden_size, f.Int("hidden_size", 1, 1 << 16));
  MEDQ_ASSIGN_OR_RETURN(c.intermediate_size, f.Int("intermediate_size", 1, 1 << 18));
  MEDQ_ASSIGN_OR_RETURN(c.num_layers, f.Int("num_hidden_layers", 1, 1024));
  MEDQ_ASSIGN_OR_RETURN(c.num_heads, f.Int("num_attention_heads", 1, 1024));
  if (c.hidden_size % c.num_heads != 0) {
    return f.Fail("num_attention_heads", "does not divide hidden_size");
  }
  c.head_dim = c.hidden_size / c.num_heads;
  MEDQ_ASSIGN_OR_RETURN(c.max_position_embeddings,
                        f.Int("max_position_embeddings", bert ? 1 : 3, 1 << 20));
  MEDQ_ASSIGN_OR_RETURN(c.layer_norm_eps, f.Epsilon("layer_norm_eps", bert ? 1e-12 : 1e-5));
  if (bert) {
    MEDQ_ASSIGN_OR_RETURN(c.type_vocab_size, f.Int("type_vocab_size", 1, 1 << 16, 2));
    MEDQ_ASSIGN_OR_RETURN(c.pad_token_id, f.Int("pad_token_id", 0, c.vocab_size - 1, 0));
    std::string position_type;
    MEDQ_ASSIGN_OR_RETURN(position_type, f.String("position_embedding_type", "absolute"));
    if (position_type != "absolute") {
      return f.Fail("position_embedding_type",
                    "is '" + position_type + "'; only \"absolute\" is supported");
    }
  } else {
    MEDQ_ASSIGN_OR_RETURN(c.relative_attention_num_buckets,
                          f.Int("relative_attention_num_buckets", kMpnetBuckets, 1 << 16, 32));
    MEDQ_ASSIGN_OR_RETURN(c.pad_token_id,
                          f.Int("pad_token_id", 0, c.vocab_size - 1, kMpnetPaddingIdx));
  }
  std::string act;
  MEDQ_ASSIGN_OR_RETURN(act, f.String("hidden_act", "gelu"));
  if (act == "gelu") {
    c.activation = EncoderActivation::kGelu;
  } else if (act == "gelu_new" || act == "gelu_pytorch_tanh") {
    c.activation = EncoderActivation::kGeluTanh;
  } else if (act == "relu") {
    c.activation = EncoderActivation::kRelu;
  } else {
    return f.Fail("hidden_act", "is '" + act + "'; supported: gelu, gelu_new, relu");
  }
  // transformers 5 writes "dtype", earlier versions "torch_dtype".
  MEDQ_ASSIGN_OR_RETURN(c.torch_dtype, f.String("torch_dtype", ""));
  if (c.torch_dtype.empty()) MEDQ_ASSIGN_OR_RETURN(c.torch_dtype, f.String("dtype", ""));
  return c;
}

Result<EncoderConfig> LoadEncoderConfig(const std::filesystem::path& dir) {
  std::error_code ec;
  const auto path = dir / "config.json";
  if (!std::filesystem::exists(path, ec)) {
    return Error(ErrorCode::kInvalidRequest,
                 "model directory " + dir.string() + " has no config.json");
  }
  auto j = ReadJsonFile(path);
  if (!j.ok()) return j.error();
  return ParseEncoderConfig(*j, path.string());
}

}  // namespace medq::engine
