#include "tools/medq-train/bpe_trainer.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "daemon/tokenizer/byte_level.h"
#include "daemon/tokenizer/regex.h"

namespace medq::train {
namespace {

// A distinct pre-tokenized piece, as symbol ids, and how often it occurs.
struct Word {
  std::vector<int32_t> symbols;
  int64_t count = 0;
};

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

// Counts every distinct piece of every document, keyed by its bytes.
Result<std::map<std::string, int64_t>> CountPieces(const std::vector<std::string>& documents) {
  auto re = tokenizer::Regex::Compile(tokenizer::kByteLevelPattern);
  if (!re.ok()) return std::move(re).error();
  std::map<std::string, int64_t> counts;
  for (const std::string& doc : documents) {
    for (const auto& [begin, end] : (*re)->FindAll(doc)) {
      if (end > begin) ++counts[doc.substr(begin, end - begin)];
    }
  }
  return counts;
}

// Replaces every (a, b) in word with merged, left to right.
void MergeInWord(std::vector<int32_t>& word, int32_t a, int32_t b, int32_t merged) {
  size_t out = 0;
  for (size_t i = 0; i < word.size(); ++i) {
    if (i + 1 < word.size() && word[i] == a && word[i + 1] == b) {
      word[out++] = merged;
      ++i;
    } else {
      word[out++] = word[i];
    }
  }
  word.resize(out);
}

}  // namespace

Result<BpeVocabulary> TrainByteLevelBpe(const std::vector<std::string>& documents,
                                        size_t vocab_size,
                                        const std::vector<std::string>& special_tokens) {
  BpeVocabulary v;
  v.tokens = special_tokens;
  v.num_special = special_tokens.size();
  if (vocab_size < v.num_special + 256) {
    return Error(ErrorCode::kInvalidRequest,
                 "vocab_size " + std::to_string(vocab_size) +
                     " cannot hold the special tokens and the 256 byte symbols");
  }
  for (int b = 0; b < 256; ++b)
    v.tokens.push_back(tokenizer::ByteToUnicode(static_cast<unsigned char>(b)));
  const auto byte_id = [&](unsigned char b) { return static_cast<int32_t>(v.num_special + b); };

  auto counts = CountPieces(documents);
  if (!counts.ok()) return std::move(counts).error();
  std::vector<Word> words;
  words.reserve(counts->size());
  for (const auto& [piece, count] : *counts) {
    Word w;
    w.count = count;
    for (const char c : piece)
      w.symbols.push_back(byte_id(static_cast<unsigned char>(c)));
    words.push_back(std::move(w));
  }

  // Plain recount per merge: a few thousand merges over tens of thousands of
  // distinct words take seconds, and the code stays obviously right.
  while (v.tokens.size() < vocab_size) {
    std::unordered_map<uint64_t, int64_t> pairs;
    for (const Word& w : words) {
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i)
        pairs[PairKey(w.symbols[i], w.symbols[i + 1])] += w.count;
    }
    uint64_t best = 0;
    int64_t best_count = 1;  // a merge must occur at least twice
    for (const auto& [key, count] : pairs) {
      if (count < best_count) continue;
      if (count == best_count) {
        if (best_count == 1) continue;
        const auto as_strings = [&](uint64_t k) {
          return std::make_pair(v.tokens[k >> 32], v.tokens[k & 0xffffffffu]);
        };
        if (as_strings(key) >= as_strings(best)) continue;
      }
      best = key;
      best_count = count;
    }
    if (best_count < 2) break;
    const auto a = static_cast<int32_t>(best >> 32);
    const auto b = static_cast<int32_t>(best & 0xffffffffu);
    const auto merged = static_cast<int32_t>(v.tokens.size());
    v.merges.emplace_back(v.tokens[static_cast<size_t>(a)], v.tokens[static_cast<size_t>(b)]);
    v.tokens.push_back(v.tokens[static_cast<size_t>(a)] + v.tokens[static_cast<size_t>(b)]);
    for (Word& w : words)
      MergeInWord(w.symbols, a, b, merged);
  }
  return v;
}

std::string TokenizerJson(const BpeVocabulary& v) {
  using nlohmann::ordered_json;
  ordered_json added = ordered_json::array();
  for (size_t id = 0; id < v.num_special; ++id) {
    added.push_back({{"id", id},
                     {"content", v.tokens[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < v.tokens.size(); ++id)
    vocab[v.tokens[id]] = id;
  ordered_json merges = ordered_json::array();
  for (const auto& [a, b] : v.merges)
    merges.push_back(a + " " + b);
  const ordered_json byte_level = {{"type", "ByteLevel"},
                                   {"add_prefix_space", false},
                                   {"trim_offsets", true},
                                   {"use_regex", true}};
  const ordered_json j = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", byte_level},
      {"post_processor", nullptr},
      {"decoder", byte_level},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", false},
        {"byte_fallback", false},
        {"ignore_merges", false},
        {"vocab", vocab},
        {"merges", merges}}},
  };
  return j.dump(1) + "\n";
}

// The chat template of a model trained on plain documents, each after the
// end-of-text token: a conversation is one such document, its turns as
// paragraphs (no role names, which the model never saw), and the answer the
// paragraph that follows.
constexpr const char* kPlainChatTemplate =
    "{{ bos_token }}{% for message in messages %}{% if not loop.first %}\n\n{% endif %}"
    "{{ message['content'] }}{% endfor %}{% if add_generation_prompt %}\n\n{% endif %}";

std::string TokenizerConfigJson(const BpeVocabulary& v) {
  const std::string special = v.num_special > 0 ? v.tokens[0] : "";
  const nlohmann::ordered_json j = {
      {"bos_token", special},
      {"eos_token", special},
      {"unk_token", nullptr},
      {"clean_up_tokenization_spaces", false},
      {"model_max_length", 1 << 20},
      {"tokenizer_class", "PreTrainedTokenizerFast"},
      {"chat_template", kPlainChatTemplate},
  };
  return j.dump(2) + "\n";
}

}  // namespace medq::train
