// The tokenization model: turns one pre-token into vocabulary ids.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/result.h"
#include "daemon/tokenizer/flat_map.h"

namespace medq::tokenizer {

// Hash for heterogeneous (string_view) lookups in string-keyed maps.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using Vocab = FlatStringMap;

class Model {
 public:
  virtual ~Model() = default;
  // Appends the ids of word (one pre-token, valid UTF-8, not empty) to ids.
  // Thread-safe.
  virtual void Tokenize(std::string_view word, std::vector<int32_t>& ids) const = 0;
  virtual std::optional<int32_t> TokenToId(std::string_view token) const = 0;
  // nullptr for an id outside the vocabulary.
  virtual const std::string* IdToToken(int32_t id) const = 0;
  // One past the largest id of the vocabulary.
  virtual size_t IdLimit() const = 0;
};

// model.vocab / model.merges when they were read outside the JSON document
// (see tokenizer_json.h); the document then holds null in their place.
struct ModelTables {
  bool has_vocab = false;
  Vocab vocab;
  bool has_merges = false;
  std::vector<std::pair<std::string, std::string>> merges;
};

// Builds the model described by j (the tokenizer.json "model" value), taking
// vocab and merges from tables when it has them (they are moved out).
// Failure: kInvalidRequest naming the unsupported type or the bad field.
Result<std::unique_ptr<Model>> ParseModel(const nlohmann::json& j, ModelTables* tables = nullptr);

// Reads a {"token": id, ...} vocabulary. Failure names the bad entry.
Result<Vocab> ParseVocab(const nlohmann::json& j, const std::string& component);

// The id -> token table of vocab: pointers into vocab (which must outlive
// it and stay unchanged), nullptr for unused ids.
std::vector<const std::string*> ReverseVocab(const Vocab& vocab);

}  // namespace medq::tokenizer
