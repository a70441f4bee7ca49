// The fallback chat template: how medq chats with a generation model that has
// no chat template of its own (docs/protocol.md, "The fallback chat
// template"). Defined here once; the worker renders `messages`, `mode: chat`
// prompts and HTTP chat with it when a model has none, and `health` warns
// about each such model.
#pragma once

#include <array>
#include <string_view>

#include "daemon/template/chat_template.h"

namespace medq::chat {

// ChatML: each message as "<|im_start|>ROLE\nCONTENT<|im_end|>\n", then
// "<|im_start|>assistant\n" when add_generation_prompt. A message's content
// is its string (null or absent: empty); any other content is a template
// error (INVALID_REQUEST). The template writes no special tokens: the prompt
// is tokenized with the tokenizer's own (BOS), as a raw prompt is.
extern const std::string_view kFallbackChatTemplateSource;

// Where a generation from a prompt the fallback rendered ends, beside its own
// stop strings and the model's end-of-sequence: the end of the assistant's
// turn, or the start of another turn.
inline constexpr std::array<std::string_view, 2> kFallbackChatStops = {"<|im_end|>",
                                                                       "<|im_start|>"};

// The fallback template, parsed on first use. Immutable: any thread may call
// this and render with the result.
const ChatTemplate& FallbackChatTemplate();

}  // namespace medq::chat
