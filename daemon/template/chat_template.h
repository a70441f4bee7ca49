// ChatTemplate: renders a Hugging Face chat template (the Jinja2 text in
// tokenizer_config.json or chat_template.jinja) into the prompt string, byte
// for byte as Python transformers does with Jinja2 (sandboxed, trim_blocks,
// lstrip_blocks, loop controls, json.dumps-based `tojson`, raise_exception,
// strftime_now).
//
// Thread safety: a ChatTemplate is immutable after creation; Render may be
// called from any number of threads at once. Copies share the parsed tree.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace medq::chat {

struct ParsedTemplate;

// The special tokens tokenizer_config.json sets; each one that is set becomes
// a template variable of the same name (unset ones stay undefined).
struct SpecialTokens {
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> unk_token;
  std::optional<std::string> sep_token;
  std::optional<std::string> pad_token;
  std::optional<std::string> cls_token;
  std::optional<std::string> mask_token;
};

// Reads the special tokens from a parsed tokenizer_config.json. A token is a
// string or an {"__type": "AddedToken", "content": ...} object (its content);
// null or absent means unset. Fails (kInvalidRequest) on any other shape.
medq::Result<SpecialTokens> SpecialTokensFromConfig(const nlohmann::json& config);

// What one render gets. Key order inside `messages`, `tools` and `extra` is
// kept, so `tojson` prints objects in the order the caller gave.
struct TemplateInputs {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  bool add_generation_prompt = true;
  nlohmann::ordered_json tools;      // null: the template sees `tools` as none
  nlohmann::ordered_json documents;  // null: `documents` is none (RAG templates)
  nlohmann::ordered_json extra;      // object (or null): extra top-level variables,
                                     // e.g. {"enable_thinking": false}; they win over
                                     // the standard ones of the same name
};

class ChatTemplate {
 public:
  // Loads `chat_template` from a tokenizer_config.json: either a string or a
  // list of {"name", "template"} objects, from which `template_name` is taken.
  // Fails with kInvalidRequest (naming the file) when the file cannot be read
  // or parsed, has no chat template, or the template does not parse.
  static medq::Result<ChatTemplate> FromTokenizerConfig(
      const std::filesystem::path& tokenizer_config_json,
      std::string_view template_name = "default");

  // Loads the chat template of a Hugging Face model folder as transformers
  // does. Template files, where the folder has any, are the templates, and
  // tokenizer_config.json's chat_template is then not read: chat_template.jinja
  // is "default", additional_chat_templates/NAME.jinja is NAME (transformers
  // 5 saves templates this way, and no longer in the config). Without them,
  // FromTokenizerConfig(dir / "tokenizer_config.json", template_name). The
  // special tokens come from tokenizer_config.json where it exists. Fails
  // with kInvalidRequest (naming the file or folder) as FromTokenizerConfig
  // does, and when no template is named `template_name`.
  static medq::Result<ChatTemplate> FromModelDir(const std::filesystem::path& dir,
                                                 std::string_view template_name = "default");

  // Parses `source`. Fails with kInvalidRequest on a syntax error; the message
  // gives the line and column.
  static medq::Result<ChatTemplate> FromSource(std::string source, SpecialTokens tokens);

  // Renders with the variables transformers passes: messages,
  // add_generation_prompt, tools, documents, the special tokens set,
  // then `in.extra`. Fails with kInvalidRequest, message "chat template error
  // at line L, column C: ...", on any template error (undefined value misuse,
  // type error, unknown filter, raise_exception, limits exceeded). Never throws.
  medq::Result<std::string> Render(const TemplateInputs& in) const;

  const std::string& source() const { return source_; }
  const SpecialTokens& special_tokens() const { return tokens_; }

 private:
  ChatTemplate(std::string source, SpecialTokens tokens,
               std::shared_ptr<const ParsedTemplate> parsed)
      : source_(std::move(source)), tokens_(std::move(tokens)), parsed_(std::move(parsed)) {}

  std::string source_;
  SpecialTokens tokens_;
  std::shared_ptr<const ParsedTemplate> parsed_;
};

}  // namespace medq::chat
