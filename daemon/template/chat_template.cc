#include "daemon/template/chat_template.h"

#include <new>
#include <optional>

#include "common/file_read.h"
#include "daemon/template/ast.h"
#include "daemon/template/builtins.h"
#include "daemon/template/evaluator.h"
#include "daemon/template/parser.h"
#include "daemon/template/scope.h"

namespace medq::chat {
namespace {

std::string Describe(const TemplateError& e) {
  std::string msg = "chat template error";
  if (e.has_pos()) {
    msg +=
        " at line " + std::to_string(e.pos().line) + ", column " + std::to_string(e.pos().column);
  }
  return msg + ": " + e.what();
}

}  // namespace

medq::Result<SpecialTokens> SpecialTokensFromConfig(const nlohmann::json& config) {
  SpecialTokens t;
  if (!config.is_object()) return InvalidRequest("tokenizer config is not a JSON object");
  const std::pair<const char*, std::optional<std::string>*> fields[] = {
      {"bos_token", &t.bos_token},  {"eos_token", &t.eos_token}, {"unk_token", &t.unk_token},
      {"sep_token", &t.sep_token},  {"pad_token", &t.pad_token}, {"cls_token", &t.cls_token},
      {"mask_token", &t.mask_token}};
  for (const auto& [name, slot] : fields) {
    const auto it = config.find(name);
    if (it == config.end() || it->is_null()) continue;
    if (it->is_string()) {
      *slot = it->get<std::string>();
    } else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
      *slot = (*it)["content"].get<std::string>();
    } else {
      return InvalidRequest(std::string("tokenizer config field '") + name +
                            "' must be a string or an AddedToken object with a string content");
    }
  }
  return t;
}

namespace {

// A tokenizer_config.json as a JSON object.
medq::Result<nlohmann::json> ReadTokenizerConfig(const std::filesystem::path& path) {
  const std::string where = path.string();
  auto text = medq::ReadWholeFile(path);
  if (!text.ok()) return std::move(text).error();
  nlohmann::json config = nlohmann::json::parse(*text, nullptr, false);
  if (config.is_discarded()) return InvalidRequest(where + ": not valid JSON");
  if (!config.is_object()) return InvalidRequest(where + ": not a JSON object");
  return config;
}

// `source` parsed, with the special tokens of `config` (none when null).
// Errors name `config_where` (a token) or `source_where` (the template).
medq::Result<ChatTemplate> WithTokens(std::string source, const nlohmann::json* config,
                                      const std::string& config_where,
                                      const std::string& source_where) {
  SpecialTokens tokens;
  if (config != nullptr) {
    medq::Result<SpecialTokens> read = SpecialTokensFromConfig(*config);
    if (!read.ok()) return InvalidRequest(config_where + ": " + read.error().message);
    tokens = std::move(read).value();
  }
  medq::Result<ChatTemplate> t = ChatTemplate::FromSource(std::move(source), std::move(tokens));
  if (!t.ok()) return InvalidRequest(source_where + ": " + t.error().message);
  return t;
}

}  // namespace

medq::Result<ChatTemplate> ChatTemplate::FromTokenizerConfig(
    const std::filesystem::path& tokenizer_config_json, std::string_view template_name) {
  const std::string where = tokenizer_config_json.string();
  auto read = ReadTokenizerConfig(tokenizer_config_json);
  if (!read.ok()) return std::move(read).error();
  const nlohmann::json config = std::move(read).value();
  const auto it = config.find("chat_template");
  if (it == config.end() || it->is_null()) {
    return InvalidRequest(where +
                          ": has no chat_template; this model cannot format chat "
                          "messages (send a plain prompt instead)");
  }
  std::string source;
  if (it->is_string()) {
    source = it->get<std::string>();
  } else if (it->is_array()) {
    bool found = false;
    for (const auto& entry : *it) {
      // An entry is picked by its name, a string (missing: ""); an entry
      // whose name is of another type names nothing. (nlohmann's
      // value("name", "") would throw on it.)
      if (!entry.is_object()) continue;
      const auto name = entry.find("name");
      if (name != entry.end() && !name->is_string()) continue;
      const std::string_view entry_name =
          name == entry.end() ? std::string_view()
                              : std::string_view(name->get_ref<const std::string&>());
      if (entry_name == template_name && entry.contains("template") &&
          entry["template"].is_string()) {
        source = entry["template"].get<std::string>();
        found = true;
        break;
      }
    }
    if (!found) {
      return InvalidRequest(where + ": chat_template has no template named '" +
                            std::string(template_name) + "'");
    }
  } else {
    return InvalidRequest(where + ": chat_template must be a string or a list of named templates");
  }
  return WithTokens(std::move(source), &config, where, where);
}

medq::Result<ChatTemplate> ChatTemplate::FromModelDir(const std::filesystem::path& dir,
                                                      std::string_view template_name) {
  namespace fs = std::filesystem;
  const fs::path config_path = dir / "tokenizer_config.json";
  const fs::path default_file = dir / "chat_template.jinja";
  const fs::path named_dir = dir / "additional_chat_templates";
  std::error_code ec;
  bool has_files = fs::is_regular_file(default_file, ec);
  if (!has_files && fs::is_directory(named_dir, ec)) {
    for (const auto& entry : fs::directory_iterator(named_dir, ec)) {
      has_files = entry.path().extension() == ".jinja" && entry.is_regular_file(ec);
      if (has_files) break;
    }
  }
  if (!has_files) return FromTokenizerConfig(config_path, template_name);

  // A name is one file name under the folder, never a path.
  const bool plain_name = !template_name.empty() && template_name != "." && template_name != ".." &&
                          template_name.find_first_of("/\\") == std::string_view::npos;
  const fs::path file = template_name == "default"
                            ? default_file
                            : named_dir / (std::string(template_name) + ".jinja");
  if (!plain_name || !fs::is_regular_file(file, ec)) {
    return InvalidRequest(dir.string() + ": has no chat template named '" +
                          std::string(template_name) +
                          "' (its templates are chat_template.jinja and "
                          "additional_chat_templates/*.jinja)");
  }
  auto source = medq::ReadWholeFile(file);
  if (!source.ok()) return std::move(source).error();
  std::optional<nlohmann::json> config;
  if (fs::exists(config_path, ec)) {
    auto read = ReadTokenizerConfig(config_path);
    if (!read.ok()) return std::move(read).error();
    config = std::move(read).value();
  }
  return WithTokens(std::move(source).value(), config ? &*config : nullptr, config_path.string(),
                    file.string());
}

medq::Result<ChatTemplate> ChatTemplate::FromSource(std::string source, SpecialTokens tokens) {
  try {
    auto parsed = std::make_shared<ParsedTemplate>(ParseTemplate(source));
    return ChatTemplate(std::move(source), std::move(tokens), std::move(parsed));
  } catch (const TemplateError& e) {
    return InvalidRequest(Describe(e));
  } catch (const std::bad_alloc&) {
    return InvalidRequest("chat template error: out of memory while parsing the template");
  }
}

medq::Result<std::string> ChatTemplate::Render(const TemplateInputs& in) const {
  if (!in.extra.is_null() && !in.extra.is_object()) {
    return InvalidRequest("chat template extra variables must be a JSON object");
  }
  try {
    auto globals = std::make_shared<Scope>();
    AddGlobalFunctions(*globals);
    globals->Set("messages", FromJson(in.messages));
    globals->Set("add_generation_prompt", Value::Bool(in.add_generation_prompt));
    globals->Set("tools", FromJson(in.tools));
    globals->Set("documents", FromJson(in.documents));
    const std::pair<const char*, const std::optional<std::string>*> tokens[] = {
        {"bos_token", &tokens_.bos_token},  {"eos_token", &tokens_.eos_token},
        {"unk_token", &tokens_.unk_token},  {"sep_token", &tokens_.sep_token},
        {"pad_token", &tokens_.pad_token},  {"cls_token", &tokens_.cls_token},
        {"mask_token", &tokens_.mask_token}};
    for (const auto& [name, value] : tokens) {
      if (value->has_value()) globals->Set(name, Value::Str(**value));
    }
    if (in.extra.is_object()) {
      for (const auto& [k, v] : in.extra.items())
        globals->Set(k, FromJson(v));
    }
    Evaluator ev(*parsed_, globals);
    return ev.Render();
  } catch (const TemplateError& e) {
    return InvalidRequest(Describe(e));
  } catch (const std::bad_alloc&) {
    return InvalidRequest("chat template error: out of memory while rendering");
  } catch (const std::exception& e) {
    return medq::Error(
        medq::ErrorCode::kInternal,
        std::string("chat template: unexpected failure while rendering: ") + e.what());
  }
}

}  // namespace medq::chat
