#include "daemon/engine/sentence_transformers.h"

#include <string>

#include <nlohmann/json.hpp>

#include "daemon/engine/model_config.h"
#include "daemon/engine/status_macros.h"

namespace medq::engine {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The module kind from its "type", e.g.
// "sentence_transformers.models.Pooling" or
// "sentence_transformers.sentence_transformer.modules.pooling.Pooling".
enum class ModuleKind { kTransformer, kPooling, kNormalize, kOther };

ModuleKind KindOf(const std::string& type) {
  if (EndsWith(type, ".Transformer")) return ModuleKind::kTransformer;
  if (EndsWith(type, ".Pooling")) return ModuleKind::kPooling;
  if (EndsWith(type, ".Normalize")) return ModuleKind::kNormalize;
  return ModuleKind::kOther;
}

// An optional JSON file: nullopt when it does not exist.
Result<std::optional<json>> ReadOptionalJson(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<json>();
  auto j = ReadJsonFile(path);
  if (!j.ok()) return j.error();
  if (!j->is_object()) return InvalidRequest(path.string() + " is not a JSON object");
  return std::optional<json>(std::move(j).value());
}

// The sequence settings of the Transformer module in `dir`.
Status ReadSequenceSettings(const fs::path& dir, SentenceTransformersLayout* out) {
  std::optional<json> sbert;
  MEDQ_ASSIGN_OR_RETURN(sbert, ReadOptionalJson(dir / "sentence_bert_config.json"));
  if (sbert) {
    const std::string source = (dir / "sentence_bert_config.json").string();
    const auto len = sbert->find("max_seq_length");
    if (len != sbert->end() && !len->is_null()) {
      if (!len->is_number_integer() || len->get<int64_t>() <= 0) {
        return InvalidRequest(source + ": 'max_seq_length' is not a positive integer");
      }
      out->max_seq_length = len->get<int64_t>();
    }
    const auto lower = sbert->find("do_lower_case");
    if (lower != sbert->end() && !lower->is_null()) {
      if (!lower->is_boolean())
        return InvalidRequest(source + ": 'do_lower_case' is not true/false");
      out->do_lower_case = lower->get<bool>();
    }
  }
  if (!out->max_seq_length) {
    // transformers writes a huge sentinel (1e30) for "no limit": ignore it.
    std::optional<json> tok;
    MEDQ_ASSIGN_OR_RETURN(tok, ReadOptionalJson(dir / "tokenizer_config.json"));
    if (tok) {
      const auto len = tok->find("model_max_length");
      if (len != tok->end() && len->is_number_integer() && len->get<int64_t>() > 0 &&
          len->get<int64_t>() < (int64_t{1} << 31)) {
        out->max_seq_length = len->get<int64_t>();
      }
    }
  }
  return Status::Ok();
}

}  // namespace

Result<SentenceTransformersLayout> ReadSentenceTransformersLayout(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return Error(ErrorCode::kModelNotFound, "model directory " + dir.string() + " does not exist");
  }
  SentenceTransformersLayout layout;
  std::optional<json> modules;
  const fs::path modules_path = dir / "modules.json";
  {
    if (fs::exists(modules_path, ec)) {
      auto j = ReadJsonFile(modules_path);
      if (!j.ok()) return j.error();
      modules = std::move(j).value();
    }
  }
  if (!modules) {
    layout.encoder_dir = dir;
    MEDQ_RETURN_IF_ERROR(ReadSequenceSettings(dir, &layout));
    return layout;
  }
  const std::string source = modules_path.string();
  if (!modules->is_array() || modules->empty()) {
    return InvalidRequest(source + " is not a non-empty list of modules");
  }
  bool have_encoder = false, have_pooling = false;
  for (size_t i = 0; i < modules->size(); ++i) {
    const json& m = (*modules)[i];
    if (!m.is_object() || !m.contains("type") || !m["type"].is_string() ||
        (m.contains("path") && !m["path"].is_string())) {
      return InvalidRequest(source + ": module " + std::to_string(i) +
                            " needs a string 'type' and 'path'");
    }
    const std::string type = m["type"].get<std::string>();
    // Module paths stay inside the folder; "" is the folder itself.
    const std::string rel = m.value("path", std::string());
    const fs::path path = rel.empty() ? dir : dir / rel;
    if (rel.find("..") != std::string::npos || (!rel.empty() && rel[0] == '/')) {
      return InvalidRequest(source + ": module path '" + rel + "' leaves the model folder");
    }
    const ModuleKind kind = KindOf(type);
    const size_t expected_index = kind == ModuleKind::kTransformer ? 0
                                  : kind == ModuleKind::kPooling   ? 1
                                                                   : 2;
    if (kind == ModuleKind::kOther || i != expected_index) {
      return InvalidRequest(
          source + ": module " + std::to_string(i) + " of type '" + type +
          "' is not supported for embeddings; supported: Transformer, then Pooling, "
          "then optionally Normalize");
    }
    if (kind == ModuleKind::kTransformer) {
      have_encoder = true;
      layout.encoder_dir = path;
      MEDQ_RETURN_IF_ERROR(ReadSequenceSettings(path, &layout));
    } else if (kind == ModuleKind::kPooling) {
      const fs::path config = path / "config.json";
      if (!fs::exists(config, ec)) {
        return InvalidRequest("the Pooling module's config " + config.string() +
                              " is missing; the sentence-transformers folder is incomplete");
      }
      auto j = ReadJsonFile(config);
      if (!j.ok()) return j.error();
      MEDQ_ASSIGN_OR_RETURN(layout.pooling, ParsePoolingConfig(*j, config.string()));
      have_pooling = true;
    } else {
      layout.normalize = true;
    }
  }
  if (!have_encoder || !have_pooling) {
    return InvalidRequest(source + " lists no " +
                          std::string(have_encoder ? "Pooling" : "Transformer") + " module");
  }
  return layout;
}

}  // namespace medq::engine
