// Fast reading of tokenizer.json: a SAX pass that stores model.vocab and
// model.merges (most of a 2-11 MB file) straight into the model's tables,
// and builds an ordinary JSON document for everything else.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "daemon/tokenizer/model.h"

namespace medq::tokenizer {

struct TokenizerJson {
  nlohmann::json doc;  // with null in place of the extracted tables
  ModelTables tables;
};

// Parses text. Failure: kInvalidRequest saying what is malformed (not JSON,
// a vocab id that is not a non-negative integer, a merge that is neither
// "a b" nor ["a", "b"]).
Result<TokenizerJson> ReadTokenizerJson(std::string_view text);

}  // namespace medq::tokenizer
