// tokenizer.json and tokenizer_config.json (daemon/tokenizer): the input is
// tokenizer.json, then optionally a NUL byte and tokenizer_config.json. A
// tokenizer that loads then encodes and decodes short texts (fixed ones and
// the input's last bytes), as the daemon does with every prompt and token.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "daemon/tokenizer/incremental_decoder.h"
#include "daemon/tokenizer/tokenizer.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

// Covers added tokens, spaces, digits, punctuation, non-ASCII and an invalid
// UTF-8 byte.
constexpr std::string_view kTexts[] = {
    "Hello, world! 12345  <s> </s> <|im_start|>user\n\tcaf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd",
    " leading and trailing  ",
    "\xff\xfe broken \xe2\x82",
};

void Exercise(const medq::tokenizer::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.Encode(text, true);
  (void)tok.Decode(ids, false);
  (void)tok.Decode(ids, true);
  medq::tokenizer::IncrementalDecoder stream(tok);
  for (int32_t id : ids)
    (void)stream.Push(id);
  (void)stream.Finish();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto [json, config] = medq::fuzz::SplitAtNul(medq::fuzz::AsText(data, size));
  auto loaded = medq::tokenizer::Tokenizer::FromJson(json, config, "fuzz");
  if (!loaded.ok()) return 0;
  const auto& tok = **loaded;
  for (std::string_view text : kTexts)
    Exercise(tok, text);
  Exercise(tok, json.substr(json.size() - std::min<size_t>(json.size(), 48)));
  (void)tok.EncodePair("a b", "c", true);
  // Ids the vocabulary may not hold, and the edges of the id range.
  const int32_t top = static_cast<int32_t>(std::min<size_t>(tok.VocabSize(), INT32_MAX));
  const std::vector<int32_t> odd = {-1, 0, 1, 2, top - 1, top, INT32_MAX, INT32_MIN};
  (void)tok.Decode(odd, false);
  (void)tok.Decode(odd, true);
  for (int32_t id : odd) {
    (void)tok.IdToToken(id);
    (void)tok.IsSpecial(id);
  }
  return 0;
}
