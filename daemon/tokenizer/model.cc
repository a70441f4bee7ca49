#include "daemon/tokenizer/model.h"

#include <nlohmann/json.hpp>

#include "daemon/tokenizer/bpe_model.h"
#include "daemon/tokenizer/json_numbers.h"
#include "daemon/tokenizer/wordpiece_model.h"

namespace medq::tokenizer {

Result<Vocab> ParseVocab(const nlohmann::json& j, const std::string& component) {
  if (!j.is_object()) {
    return Error(ErrorCode::kInvalidRequest, component + ": \"vocab\" must be an object");
  }
  Vocab vocab;
  vocab.Reserve(j.size());
  for (const auto& [token, id] : j.items()) {
    const std::optional<int32_t> valid = TokenIdOf(id);
    if (!valid) {
      return Error(ErrorCode::kInvalidRequest,
                   component + ": vocab entry \"" + token + "\" has no valid id");
    }
    vocab.Insert(token, *valid);
  }
  return vocab;
}

std::vector<const std::string*> ReverseVocab(const Vocab& vocab) {
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab.entries())
    max_id = std::max(max_id, id);
  std::vector<const std::string*> r(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : vocab.entries())
    r[static_cast<size_t>(id)] = &token;
  return r;
}

namespace {

// The id -> token table has one slot per id up to the largest, so refuse ids
// far beyond the vocabulary's size (a corrupt file could ask for gigabytes).
Status CheckIdRange(const Vocab& vocab, const std::string& component) {
  int64_t max_id = -1;
  for (const auto& [token, id] : vocab.entries())
    max_id = std::max<int64_t>(max_id, id);
  const int64_t limit = 4 * static_cast<int64_t>(vocab.size()) + (1 << 20);
  if (max_id >= limit) {
    return Error(ErrorCode::kInvalidRequest, component + ": vocab id " + std::to_string(max_id) +
                                                 " is far beyond its " +
                                                 std::to_string(vocab.size()) + " entries");
  }
  return Status::Ok();
}

std::optional<std::string> OptionalString(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<std::string>();
}

Result<std::unique_ptr<Model>> ParseBpe(const nlohmann::json& j, ModelTables* tables) {
  if (j.contains("dropout") && !j["dropout"].is_null() && j["dropout"].get<double>() > 0.0) {
    return Error(ErrorCode::kInvalidRequest,
                 "model BPE: dropout is not supported (it makes encoding random)");
  }
  Result<Vocab> vocab = tables != nullptr && tables->has_vocab
                            ? Result<Vocab>(std::move(tables->vocab))
                            : ParseVocab(j.at("vocab"), "model BPE");
  if (!vocab.ok()) return std::move(vocab).error();
  if (auto s = CheckIdRange(*vocab, "model BPE"); !s.ok()) return s.error();
  std::vector<std::pair<std::string, std::string>> merges;
  const bool have_merges = tables != nullptr && tables->has_merges;
  if (have_merges) merges = std::move(tables->merges);
  static const nlohmann::json kNoMerges = nlohmann::json::array();
  const nlohmann::json& jm = have_merges ? kNoMerges : j.at("merges");
  if (!jm.is_array()) {
    return Error(ErrorCode::kInvalidRequest, "model BPE: \"merges\" must be an array");
  }
  if (!have_merges) merges.reserve(jm.size());
  for (const auto& m : jm) {
    if (m.is_string()) {
      const auto& s = m.get_ref<const std::string&>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return Error(ErrorCode::kInvalidRequest,
                     "model BPE: merge \"" + s + "\" is not two tokens separated by one space");
      }
      merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      return Error(ErrorCode::kInvalidRequest,
                   "model BPE: each merge must be \"a b\" or [\"a\", \"b\"]");
    }
  }
  BpeOptions o;
  o.unk_token = OptionalString(j, "unk_token");
  o.continuing_subword_prefix = OptionalString(j, "continuing_subword_prefix").value_or("");
  o.end_of_word_suffix = OptionalString(j, "end_of_word_suffix").value_or("");
  o.fuse_unk = j.value("fuse_unk", false);
  o.byte_fallback = j.value("byte_fallback", false);
  o.ignore_merges = j.value("ignore_merges", false);
  auto model = BpeModel::Create(std::move(vocab).value(), merges, std::move(o));
  if (!model.ok()) return std::move(model).error();
  return std::unique_ptr<Model>(std::move(model).value());
}

Result<std::unique_ptr<Model>> ParseWordPiece(const nlohmann::json& j, ModelTables* tables) {
  Result<Vocab> vocab = tables != nullptr && tables->has_vocab
                            ? Result<Vocab>(std::move(tables->vocab))
                            : ParseVocab(j.at("vocab"), "model WordPiece");
  if (!vocab.ok()) return std::move(vocab).error();
  if (auto s = CheckIdRange(*vocab, "model WordPiece"); !s.ok()) return s.error();
  const std::optional<size_t> max_chars = CountOf(j, "max_input_chars_per_word", 100);
  if (!max_chars) {
    return Error(ErrorCode::kInvalidRequest,
                 "model WordPiece: \"max_input_chars_per_word\" must be a non-negative integer");
  }
  auto model =
      WordPieceModel::Create(std::move(vocab).value(), j.value("unk_token", std::string("[UNK]")),
                             j.value("continuing_subword_prefix", std::string("##")), *max_chars);
  if (!model.ok()) return std::move(model).error();
  return std::unique_ptr<Model>(std::move(model).value());
}

}  // namespace

Result<std::unique_ptr<Model>> ParseModel(const nlohmann::json& j, ModelTables* tables) {
  if (!j.is_object()) return Error(ErrorCode::kInvalidRequest, "model: must be an object");
  // Old files omit "type" for BPE; infer it from the merges.
  std::string type;
  if (j.contains("type") && j["type"].is_string()) {
    type = j["type"].get<std::string>();
  } else if (j.contains("merges")) {
    type = "BPE";
  } else if (j.contains("continuing_subword_prefix")) {
    type = "WordPiece";
  }
  if (type == "BPE") return ParseBpe(j, tables);
  if (type == "WordPiece") return ParseWordPiece(j, tables);
  return Error(ErrorCode::kInvalidRequest, "unsupported model type \"" + type + "\"");
}

}  // namespace medq::tokenizer
