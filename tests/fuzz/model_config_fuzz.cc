// A model folder's config.json and generation_config.json (daemon/engine
// model_config, encoder_config): read from a file as LoadModelConfig and
// LoadEncoderConfig read them, then checked as a decoder's and an encoder's
// config. The input is config.json, then optionally a NUL byte and
// generation_config.json.
#include <nlohmann/json.hpp>

#include "daemon/engine/encoder_config.h"
#include "daemon/engine/model_config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static medq::fuzz::MemFile config_file;
  static medq::fuzz::MemFile generation_file;
  const auto [config_text, generation_text] =
      medq::fuzz::SplitAtNul(medq::fuzz::AsText(data, size));
  auto config = medq::engine::ReadJsonFile(config_file.Write(config_text));
  if (!config.ok()) return 0;
  const nlohmann::json* generation = nullptr;
  auto generation_json = medq::engine::ReadJsonFile(generation_file.Write(generation_text));
  if (generation_json.ok()) generation = &*generation_json;
  (void)medq::engine::ParseModelConfig(*config, generation, "config.json");
  if (auto encoder = medq::engine::ParseEncoderConfig(*config, "config.json"); encoder.ok()) {
    (void)encoder->MaxSequence();
  }
  return 0;
}
