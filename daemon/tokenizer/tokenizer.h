// medq's Hugging Face tokenizer: loads tokenizer.json (and
// tokenizer_config.json) and encodes/decodes token for token like the
// Hugging Face `tokenizers` library and transformers.
//
// Supported components: models BPE (byte-level and SentencePiece-style with
// byte_fallback) and WordPiece; normalizers NFC, NFD, NFKC, NFKD, Lowercase, BertNormalizer,
// Prepend, Replace, Strip, Sequence; pre-tokenizers ByteLevel, Split,
// Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit,
// CharDelimiterSplit, BertPreTokenizer, Sequence; post-processors
// TemplateProcessing, ByteLevel, BertProcessing, RobertaProcessing, Sequence;
// decoders ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace,
// WordPiece, BPEDecoder, Sequence. Anything else is refused at load time.
//
// Input text rule: Encode() first replaces each maximal invalid UTF-8
// subsequence of its input with U+FFFD (the Unicode "maximal subpart" rule),
// then tokenizes the result.
//
// Special tokens: what Encode(add_special_tokens=true) adds is decided by the
// tokenizer.json post-processor alone, as in the Rust library and
// transformers.js; tokenizer_config.json's add_bos_token is not consulted. So
// DeepSeek-V3 (plain ByteLevel post-processor) gets no BOS, where Python's
// LlamaTokenizerFast would prepend one; a caller that wants it prepends
// BosId() itself.
//
// tokenizer_config.json: bos_token / eos_token (a string or an AddedToken
// object) give BosId() / EosId(); clean_up_tokenization_spaces turns on
// transformers' clean-up in Decode (default true when the file exists but
// omits the key, as transformers; false when there is no such file).
//
// Thread safety: a loaded Tokenizer is immutable apart from an internal,
// mutex-guarded word cache; every const method may be called from any number
// of threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/result.h"
#include "daemon/tokenizer/added_vocabulary.h"

namespace medq::tokenizer {

class Normalizer;
class PreTokenizer;
class Model;
class PostProcessor;
class Decoder;

class Tokenizer {
 public:
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Loads tokenizer_json, and tokenizer_config.json from the same folder when
  // it exists. Failure: kInvalidRequest with the file and the component in the
  // message (unreadable or malformed JSON, an unsupported component, a bad
  // field). Never throws.
  static Result<std::unique_ptr<Tokenizer>> FromFile(const std::filesystem::path& tokenizer_json);
  // FromFile(dir / "tokenizer.json").
  static Result<std::unique_ptr<Tokenizer>> FromModelDir(const std::filesystem::path& dir);
  // Builds from JSON text already in memory (config_json may be empty: no
  // tokenizer_config.json). source names the origin in error messages.
  static Result<std::unique_ptr<Tokenizer>> FromJson(std::string_view tokenizer_json,
                                                     std::string_view config_json = {},
                                                     std::string_view source = "<memory>");

  // The ids of text. With add_special_tokens the post-processor adds its
  // special tokens (e.g. BOS); added tokens written in text (such as
  // "<|im_start|>") are always recognized. Any input is accepted (see the
  // input text rule above); linear time in the input size.
  std::vector<int32_t> Encode(std::string_view text, bool add_special_tokens = true) const;
  // Encodes a pair of sequences (the post-processor's "pair" template).
  std::vector<int32_t> EncodePair(std::string_view a, std::string_view b,
                                  bool add_special_tokens = true) const;

  // The text of ids. Ids that are in neither the vocabulary nor the added
  // tokens are skipped. With skip_special_tokens, added tokens marked special
  // are left out. Applies transformers' clean-up when tokenizer_config.json
  // asks for it. The result is valid UTF-8 (invalid bytes become U+FFFD).
  std::string Decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The id of a vocabulary or added token string, if any.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // The raw vocabulary (or added token) string of id; "" when id is unknown.
  std::string IdToToken(int32_t id) const;
  // The bytes id adds to a text when it stands in the middle of it (the
  // decoder's rules without UTF-8 repair or stripping at the ends; a token
  // that is part of a character gives that part), for matching tokens against
  // a grammar. Added tokens give their content, special ones included; an
  // unknown id gives nullopt.
  std::optional<std::string> TokenBytes(int32_t id) const;
  // One past the largest id in the vocabulary or the added tokens.
  size_t VocabSize() const;
  // Ids of tokenizer_config.json's bos_token / eos_token, when set and known.
  std::optional<int32_t> BosId() const { return bos_id_; }
  std::optional<int32_t> EosId() const { return eos_id_; }
  // True for added tokens marked "special".
  bool IsSpecial(int32_t id) const;
  // Whether Decode applies transformers' clean_up_tokenization.
  bool CleansUpSpaces() const { return clean_up_spaces_; }

 private:
  Tokenizer();
  class Loader;
  void EncodeSequence(std::string_view text, std::vector<int32_t>& ids) const;
  void EncodeText(std::string text, bool at_origin, std::vector<int32_t>& ids) const;
  const AddedToken* FindAdded(int32_t id) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;

  std::vector<AddedToken> added_;
  std::unordered_map<int32_t, size_t> added_by_id_;
  std::unordered_map<std::string, int32_t> added_by_content_;
  std::unordered_set<std::string> added_contents_;
  TokenMatcher raw_matcher_;         // added tokens with normalized=false
  TokenMatcher normalized_matcher_;  // added tokens with normalized=true

  std::optional<int32_t> bos_id_;
  std::optional<int32_t> eos_id_;
  bool clean_up_spaces_ = false;
};

}  // namespace medq::tokenizer
