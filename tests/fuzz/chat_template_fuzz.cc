// Chat template source (daemon/template: Jinja lexer, parser, evaluator):
// the input is the template text itself, parsed and rendered with a small
// conversation, as for a template read from tokenizer_config.json.
#include <string>

#include "daemon/template/chat_template.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/template_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  medq::chat::SpecialTokens tokens;
  tokens.bos_token = "<s>";
  tokens.eos_token = "</s>";
  auto chat = medq::chat::ChatTemplate::FromSource(std::string(medq::fuzz::AsText(data, size)),
                                                   std::move(tokens));
  if (!chat.ok()) return 0;
  for (const auto& inputs : medq::fuzz::Conversations())
    (void)chat->Render(inputs);
  return 0;
}
