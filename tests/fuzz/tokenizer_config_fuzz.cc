// tokenizer_config.json's chat template (daemon/template): the file as the
// daemon reads it from a model folder (ChatTemplate::FromTokenizerConfig:
// the JSON, chat_template as a string or a list of named templates, the
// special tokens), then a render of a small conversation.
#include "daemon/template/chat_template.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/template_inputs.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static medq::fuzz::MemFile file;
  const std::string& path = file.Write(medq::fuzz::AsText(data, size));
  auto chat = medq::chat::ChatTemplate::FromTokenizerConfig(path);
  if (!chat.ok()) return 0;
  for (const auto& inputs : medq::fuzz::Conversations())
    (void)chat->Render(inputs);
  return 0;
}
