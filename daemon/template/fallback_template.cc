#include "daemon/template/fallback_template.h"

#include <stdexcept>
#include <string>

namespace medq::chat {

const std::string_view kFallbackChatTemplateSource =
    "{%- for message in messages -%}\n"
    "{%- if message['content'] is string -%}\n"
    "{%- set content = message['content'] -%}\n"
    "{%- elif message['content'] is none or message['content'] is not defined -%}\n"
    "{%- set content = '' -%}\n"
    "{%- else -%}\n"
    "{{- raise_exception('the fallback chat template takes a message content that is a "
    "string') -}}\n"
    "{%- endif -%}\n"
    "{{- '<|im_start|>' ~ message['role'] ~ '\\n' ~ content ~ '<|im_end|>\\n' -}}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}\n"
    "{{- '<|im_start|>assistant\\n' -}}\n"
    "{%- endif -%}\n";

const ChatTemplate& FallbackChatTemplate() {
  static const ChatTemplate fallback = [] {
    auto parsed = ChatTemplate::FromSource(std::string(kFallbackChatTemplateSource), {});
    // A constant that parses: a failure here is a bug in this file, caught by
    // its tests.
    if (!parsed.ok()) throw std::logic_error("fallback chat template: " + parsed.error().message);
    return std::move(parsed).value();
  }();
  return fallback;
}

}  // namespace medq::chat
