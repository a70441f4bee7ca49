#include "tools/medq-train/corpus.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace medq::train {

Result<Corpus> ReadCorpus(const std::filesystem::path& path, int validation_every) {
  std::ifstream in(path);
  if (!in) return Error(ErrorCode::kInvalidRequest, "cannot read the corpus " + path.string());
  std::vector<std::string> documents;
  std::string line, doc;
  const auto flush = [&] {
    if (!doc.empty()) documents.push_back(std::move(doc));
    doc.clear();
  };
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) {
      flush();
      continue;
    }
    if (!doc.empty()) doc += ' ';
    doc += line;
  }
  flush();
  if (documents.empty()) {
    return Error(ErrorCode::kInvalidRequest, "the corpus " + path.string() + " holds no text");
  }
  Corpus c;
  for (size_t i = 0; i < documents.size(); ++i) {
    const bool held_out = validation_every > 0 && i % static_cast<size_t>(validation_every) == 0;
    (held_out ? c.validation : c.train).push_back(std::move(documents[i]));
  }
  return c;
}

std::vector<int32_t> EncodeDocuments(const tokenizer::Tokenizer& tokenizer,
                                     const std::vector<std::string>& documents, int32_t separator) {
  std::vector<int32_t> ids;
  for (const std::string& doc : documents) {
    const std::vector<int32_t> piece = tokenizer.Encode(doc, /*add_special_tokens=*/false);
    ids.insert(ids.end(), piece.begin(), piece.end());
    ids.push_back(separator);
  }
  return ids;
}

std::string FingerprintFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t h = 14695981039346656037ull;
  char buf[1 << 16];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h ^= static_cast<unsigned char>(buf[i]);
      h *= 1099511628211ull;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace medq::train
