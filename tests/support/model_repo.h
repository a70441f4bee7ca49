// A models directory for end-to-end tests, assembled from the fixtures: each
// tiny model folder gets the tokenizer it pairs with (fixtures/README.md), so
// that text goes in and text comes out. Files are symlinks to the fixtures;
// the folders themselves are real, inside the models directory.
#pragma once

#include <filesystem>
#include <string>

#include "tests/support/daemon_process.h"

namespace medq::test {

class ModelRepo {
 public:
  // Creates <tmp>/models with tiny-llama (+ mistral_v1 tokenizer), tiny-llama3
  // (+ llama3), tiny-qwen2 (+ qwen3) and the adapter tiny-llama-lora.
  ModelRepo();
  const std::filesystem::path& dir() const { return dir_; }
  // Adds the model folder `source` as dir()/name: a real folder of symlinks
  // to its entries (e.g. an embedding model from tests/engine/data).
  void AddModel(const std::string& name, const std::filesystem::path& source) const;

 private:
  TempDir tmp_;
  std::filesystem::path dir_;
};

}  // namespace medq::test
