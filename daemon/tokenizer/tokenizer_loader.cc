// Tokenizer construction from tokenizer.json / tokenizer_config.json.
#include <nlohmann/json.hpp>

#include "common/file_read.h"
#include "daemon/tokenizer/decoder.h"
#include "daemon/tokenizer/json_numbers.h"
#include "daemon/tokenizer/model.h"
#include "daemon/tokenizer/normalizer.h"
#include "daemon/tokenizer/post_processor.h"
#include "daemon/tokenizer/pre_tokenizer.h"
#include "daemon/tokenizer/tokenizer.h"
#include "daemon/tokenizer/tokenizer_json.h"

namespace medq::tokenizer {

class Tokenizer::Loader {
 public:
  explicit Loader(std::string source) : source_(std::move(source)) {}

  Result<std::unique_ptr<Tokenizer>> Load(std::string_view json_text, std::string_view config) {
    // nlohmann reports field errors by exception; none leaves this function.
    try {
      return LoadUnchecked(json_text, config);
    } catch (const nlohmann::json::exception& e) {
      return Fail(std::string("missing or malformed field (") + e.what() + ")");
    } catch (const std::exception& e) {
      return Fail(std::string("cannot load: ") + e.what());
    }
  }

 private:
  // Runs parse, turning a JSON access error (missing key, wrong type) into an
  // error that names the component.
  template <typename F>
  static auto Guarded(const char* component, F parse) -> decltype(parse()) {
    try {
      return parse();
    } catch (const nlohmann::json::exception& e) {
      return Error(ErrorCode::kInvalidRequest,
                   std::string(component) + ": missing or malformed field (" + e.what() + ")");
    }
  }

  Error Fail(const std::string& what) const {
    return Error(ErrorCode::kInvalidRequest, source_ + ": " + what);
  }

  Result<std::unique_ptr<Tokenizer>> LoadUnchecked(std::string_view json_text,
                                                   std::string_view config) {
    auto parsed = ReadTokenizerJson(json_text);
    if (!parsed.ok()) return Fail(parsed.error().message);
    const nlohmann::json& j = parsed->doc;
    if (!j.is_object()) return Fail("not a JSON object");
    std::unique_ptr<Tokenizer> t(new Tokenizer());

    if (!j.contains("model")) return Fail("no \"model\"");
    auto model = Guarded("model", [&] { return ParseModel(j["model"], &parsed->tables); });
    if (!model.ok()) return Fail(model.error().message);
    t->model_ = std::move(model).value();

    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      auto n = Guarded("normalizer", [&] { return ParseNormalizer(j["normalizer"]); });
      if (!n.ok()) return Fail(n.error().message);
      t->normalizer_ = std::move(n).value();
    }
    if (j.contains("pre_tokenizer") && !j["pre_tokenizer"].is_null()) {
      auto p = Guarded("pre_tokenizer", [&] { return ParsePreTokenizer(j["pre_tokenizer"]); });
      if (!p.ok()) return Fail(p.error().message);
      t->pre_tokenizer_ = std::move(p).value();
    }
    if (j.contains("post_processor") && !j["post_processor"].is_null()) {
      auto p = Guarded("post_processor", [&] { return ParsePostProcessor(j["post_processor"]); });
      if (!p.ok()) return Fail(p.error().message);
      t->post_processor_ = std::move(p).value();
    }
    if (auto s = LoadAddedTokens(j, *t); !s.ok()) return s.error();
    if (j.contains("decoder") && !j["decoder"].is_null()) {
      auto d = Guarded("decoder", [&] { return ParseDecoder(j["decoder"], &t->added_contents_); });
      if (!d.ok()) return Fail(d.error().message);
      t->decoder_ = std::move(d).value();
    }
    if (!config.empty()) {
      if (auto s = LoadConfig(config, *t); !s.ok()) return s.error();
    }
    return t;
  }

  Status LoadAddedTokens(const nlohmann::json& j, Tokenizer& t) {
    if (!j.contains("added_tokens") || j["added_tokens"].is_null()) return Status::Ok();
    if (!j["added_tokens"].is_array()) return Fail("\"added_tokens\" must be an array");
    for (const auto& a : j["added_tokens"]) {
      AddedToken tok;
      tok.content = a.at("content").get<std::string>();
      const std::optional<int32_t> id = TokenIdOf(a.at("id"));
      if (!id) return Fail("added token \"" + tok.content + "\" has no valid id");
      tok.id = *id;
      tok.special = a.value("special", false);
      tok.normalized = a.value("normalized", !tok.special);
      tok.lstrip = a.value("lstrip", false);
      tok.rstrip = a.value("rstrip", false);
      tok.single_word = a.value("single_word", false);
      if (tok.content.empty()) return Fail("added token " + std::to_string(tok.id) + " is empty");
      const auto index = static_cast<int32_t>(t.added_.size());
      if (tok.normalized && t.normalizer_ != nullptr) {
        std::string pattern = tok.content;
        t.normalizer_->Normalize(pattern);
        t.normalized_matcher_.Add(pattern, index);
      } else if (tok.normalized) {
        t.normalized_matcher_.Add(tok.content, index);
      } else {
        t.raw_matcher_.Add(tok.content, index);
      }
      t.added_by_id_[tok.id] = t.added_.size();
      t.added_by_content_.emplace(tok.content, tok.id);
      t.added_contents_.insert(tok.content);
      t.added_.push_back(std::move(tok));
    }
    return Status::Ok();
  }

  static std::optional<std::string> TokenString(const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v["content"].is_string()) {
      return v["content"].get<std::string>();
    }
    return std::nullopt;
  }

  Status LoadConfig(std::string_view text, Tokenizer& t) {
    const auto c = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
    if (c.is_discarded() || !c.is_object()) {
      return Error(ErrorCode::kInvalidRequest,
                   source_ + ": tokenizer_config.json is not a valid JSON object");
    }
    // transformers' default is to clean up when the key is absent.
    t.clean_up_spaces_ = true;
    if (c.contains("clean_up_tokenization_spaces") &&
        c["clean_up_tokenization_spaces"].is_boolean()) {
      t.clean_up_spaces_ = c["clean_up_tokenization_spaces"].get<bool>();
    }
    if (c.contains("bos_token")) {
      if (auto s = TokenString(c["bos_token"])) t.bos_id_ = t.TokenToId(*s);
    }
    if (c.contains("eos_token")) {
      if (auto s = TokenString(c["eos_token"])) t.eos_id_ = t.TokenToId(*s);
    }
    return Status::Ok();
  }

  std::string source_;
};

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(std::string_view tokenizer_json,
                                                       std::string_view config_json,
                                                       std::string_view source) {
  return Loader(std::string(source)).Load(tokenizer_json, config_json);
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromFile(const std::filesystem::path& path) {
  auto text = ReadWholeFile(path);
  if (!text.ok()) return std::move(text).error();
  std::string config;
  std::error_code ec;
  const auto config_path = path.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(config_path, ec)) {
    auto c = ReadWholeFile(config_path);
    if (!c.ok()) return std::move(c).error();
    config = std::move(c).value();
  }
  return FromJson(*text, config, path.string());
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromModelDir(const std::filesystem::path& dir) {
  return FromFile(dir / "tokenizer.json");
}

}  // namespace medq::tokenizer
