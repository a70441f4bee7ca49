// The training text: documents separated by blank lines, split into a
// training and a validation set, and turned into one stream of token ids.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/result.h"
#include "daemon/tokenizer/tokenizer.h"

namespace medq::train {

struct Corpus {
  std::vector<std::string> train, validation;  // documents
};

// Reads `path` (UTF-8 text; documents separated by one or more blank lines;
// the lines of a document are joined with single spaces). Every
// `validation_every`-th document (the 0th, then every n-th) goes to the
// validation set; 0 puts none there. Failure: kInvalidRequest naming the file
// when it cannot be read or holds no document.
Result<Corpus> ReadCorpus(const std::filesystem::path& path, int validation_every);

// The documents' ids, each document followed by `separator` (the end-of-text
// token), in order.
std::vector<int32_t> EncodeDocuments(const tokenizer::Tokenizer& tokenizer,
                                     const std::vector<std::string>& documents, int32_t separator);

// A 64-bit FNV-1a hash of a file's bytes, in hex, to record which
// corpus a model was trained on.
std::string FingerprintFile(const std::filesystem::path& path);

}  // namespace medq::train
