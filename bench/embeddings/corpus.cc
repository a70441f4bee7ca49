#include "bench/embeddings/corpus.h"

#include <cctype>
#include <string_view>

namespace medq::bench {
namespace {

// Common English words; nearly all are one WordPiece token each in an
// uncased BERT vocabulary, so that a text can be filled to an exact length.
constexpr std::string_view kWords[] = {
    "the",      "river",  "carries", "old",      "boats",  "past",     "northern", "town",
    "a",        "quiet",  "morning", "light",    "falls",  "on",       "green",    "hills",
    "people",   "walk",   "to",      "market",   "with",   "bread",    "and",      "fruit",
    "children", "play",   "near",    "school",   "after",  "long",     "day",      "of",
    "work",     "rain",   "comes",   "from",     "west",   "over",     "sea",      "ships",
    "wait",     "in",     "harbor",  "for",      "wind",   "change",   "doctor",   "reads",
    "new",      "report", "about",   "heart",    "health", "patients", "need",     "care",
    "every",    "week",   "city",    "council",  "will",   "vote",     "road",     "plan",
    "music",    "fills",  "small",   "room",     "while",  "friends",  "talk",     "late",
    "into",     "night",  "water",   "price",    "rose",   "again",    "this",     "year",
    "farmers",  "hope",   "better",  "harvest",  "soon",   "train",    "leaves",   "station",
    "at",       "noon",   "each",    "sunday",   "book",   "tells",    "story",    "family",
    "who",      "moved",  "south",   "war",      "team",   "won",      "game",     "by",
    "two",      "points", "final",   "minute",   "storm",  "closed",   "roads",    "across",
    "state",    "power",  "lines",   "were",     "down",   "hours",    "museum",   "opens",
    "art",      "show",   "next",    "month",    "bank",   "raised",   "rates",    "three",
    "times",    "since",  "spring",  "engineer", "fixed",  "bridge",   "before",   "winter",
    "student",  "wrote",  "letter",  "her",      "mother", "home",     "garden",   "needs",
    "more",     "sun",    "than",    "shade",    "coffee", "shop",     "sells",    "fresh",
};
constexpr uint64_t kWordCount = sizeof(kWords) / sizeof(kWords[0]);

// A 64-bit LCG: the same texts on every machine and in every program.
struct Lcg {
  uint64_t x;
  uint64_t Next() {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return x >> 33;
  }
  std::string_view Word() { return kWords[Next() % kWordCount]; }
};

std::string Capitalized(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

}  // namespace

std::vector<int32_t> TokenizeForEmbedding(const tokenizer::Tokenizer& tok,
                                          const engine::EmbeddingInfo& info,
                                          const std::string& text) {
  std::vector<int32_t> ids;
  if (info.do_lower_case) {
    std::string lower = text;
    for (char& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    ids = tok.Encode(lower, true);
  } else {
    ids = tok.Encode(text, true);
  }
  if (info.max_seq_length > 0 && static_cast<int64_t>(ids.size()) > info.max_seq_length) {
    const int32_t last = ids.back();
    ids.resize(static_cast<size_t>(info.max_seq_length - 1));
    ids.push_back(last);
  }
  return ids;
}

EmbedCorpus ShortCorpus(const tokenizer::Tokenizer& tok, const engine::EmbeddingInfo& info,
                        int count) {
  EmbedCorpus corpus;
  corpus.name = "short";
  for (int i = 0; i < count; ++i) {
    Lcg rng{1000003ull * static_cast<uint64_t>(i + 1)};
    const int words = 8 + static_cast<int>(rng.Next() % 5);
    std::string text;
    for (int w = 0; w < words; ++w) {
      if (w) text += ' ';
      text += rng.Word();
    }
    text = Capitalized(text) + ".";
    corpus.tokens.push_back(static_cast<int>(TokenizeForEmbedding(tok, info, text).size()));
    corpus.texts.push_back(std::move(text));
  }
  return corpus;
}

Result<EmbedCorpus> FixedLengthCorpus(const tokenizer::Tokenizer& tok,
                                      const engine::EmbeddingInfo& info, int count, int length) {
  if (info.max_seq_length > 0 && length > info.max_seq_length) {
    return Error(ErrorCode::kInternal, "texts of " + std::to_string(length) +
                                           " tokens are longer than the model's max_seq_length " +
                                           std::to_string(info.max_seq_length));
  }
  engine::EmbeddingInfo untruncated = info;
  untruncated.max_seq_length = 0;
  EmbedCorpus corpus;
  corpus.name = "tok" + std::to_string(length);
  for (int i = 0; i < count; ++i) {
    Lcg rng{7919ull * static_cast<uint64_t>(i + 1) + 17};
    std::string text;
    int have = 0;
    // Words are appended while the text stays within `length` ids; a word
    // that would overshoot is skipped for another.
    for (int tries = 0; have != length; ++tries) {
      if (tries > 100000) {
        return Error(ErrorCode::kInternal,
                     "could not make a text of exactly " + std::to_string(length) + " tokens");
      }
      const std::string candidate = text.empty() ? Capitalized(std::string(rng.Word()))
                                                 : text + " " + std::string(rng.Word());
      const int n = static_cast<int>(TokenizeForEmbedding(tok, untruncated, candidate).size());
      if (n > length) continue;
      text = candidate;
      have = n;
    }
    const int check = static_cast<int>(TokenizeForEmbedding(tok, info, text).size());
    if (check != length) {
      return Error(ErrorCode::kInternal, "text " + std::to_string(i) + " has " +
                                             std::to_string(check) + " tokens, not " +
                                             std::to_string(length));
    }
    corpus.tokens.push_back(check);
    corpus.texts.push_back(std::move(text));
  }
  return corpus;
}

}  // namespace medq::bench
