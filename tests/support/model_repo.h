// A models directory for end-to-end tests, assembled from the fixtures: each
// tiny model folder gets the tokenizer it pairs with (fixtures/README.md), so
// that text goes in and text comes out. Files are symlinks to the fixtures;
// the folders themselves are real, inside the models directory.
#pragma once

#include <filesystem>

#include "tests/support/daemon_process.h"

namespace medq::test {

class ModelRepo {
 public:
  // Creates <tmp>/models with tiny-llama (+ mistral_v1 tokenizer), tiny-llama3
  // (+ llama3), tiny-qwen2 (+ qwen3) and the adapter tiny-llama-lora.
  ModelRepo();
  const std::filesystem::path& dir() const { return dir_; }

 private:
  TempDir tmp_;
  std::filesystem::path dir_;
};

}  // namespace medq::test
