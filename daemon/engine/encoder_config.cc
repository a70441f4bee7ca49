#include "daemon/engine/encoder_config.h"

#include <cmath>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "daemon/engine/config_reader.h"
#include "daemon/engine/model_config.h"
#include "daemon/engine/status_macros.h"

namespace medq::engine {
namespace {

using nlohmann::json;

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
  // A model with a task head (BertForMaskedLM, MPNetForMaskedLM, ...) names
  // that head in config.json even when its checkpoint holds only the encoder:
  // all-mpnet-base-v2 keeps microsoft/mpnet-base's "MPNetForMaskedLM".
  // sentence-transformers loads such a folder with transformers' AutoModel,
  // which builds the bare encoder from model_type; so does this. Tensors of
  // the head itself, if any, are still refused as unexpected.
  for (const std::string_view base : {"Bert", "MPNet"}) {
    if (c.architecture.size() > base.size() + 3 && c.architecture.starts_with(base) &&
        c.architecture.compare(base.size(), 3, "For") == 0) {
      c.architecture = std::string(base) + "Model";
    }
  }
  if (c.architecture == "BertModel") {
    c.arch = EncoderArch::kBert;
  } else if (c.architecture == "MPNetModel") {
    c.arch = EncoderArch::kMpnet;
  } else {
    return Error(ErrorCode::kInvalidRequest,
                 source + ": architecture '" + c.architecture +
                     "' is not supported for embeddings; supported: BertModel, MPNetModel");
  }
  const ConfigReader f(j, source);
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
  MEDQ_ASSIGN_OR_RETURN(c.layer_norm_eps, f.Positive("layer_norm_eps", 1, bert ? 1e-12 : 1e-5));
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
