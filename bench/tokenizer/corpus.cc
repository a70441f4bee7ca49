#include "bench/tokenizer/corpus.h"

#include <array>
#include <string_view>

namespace medq::bench {
namespace {

// SplitMix64: tiny, deterministic, good enough for picking words.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

constexpr std::array<std::string_view, 48> kWords = {
    "the",       "patient",     "was",       "admitted",  "with",      "a",          "history",
    "of",        "and",         "presented", "to",        "emergency", "department", "after",
    "two",       "days",        "worsening", "shortness", "breath",    "she",        "reports",
    "no",        "fever",       "but",       "mild",      "cough",     "which",      "improved",
    "overnight", "family",      "members",   "were",      "informed",  "about",      "plan",
    "treatment", "however",     "remains",   "stable",    "morning",   "quickly",    "because",
    "although",  "recommended", "follow-up", "clinic",    "weeks",     "discharge"};

constexpr std::array<std::string_view, 16> kDrugs = {
    "vancomycin", "metoprolol",  "lisinopril",   "atorvastatin", "metformin",   "heparin",
    "warfarin",   "insulin",     "furosemide",   "amoxicillin",  "ceftriaxone", "apixaban",
    "prednisone", "ondansetron", "pantoprazole", "acetaminophen"};

constexpr std::array<std::string_view, 12> kEmoji = {
    "😀",  "👍🏽", "❤️", "🩺", "💊", "🤒", "👩‍⚕️",
    "🇺🇸", "1️⃣",  "🎉",      "🙏",    "🔥"};

void Prose(Rng& rng, std::string& out) {
  const size_t n = 8 + rng.Below(20);
  for (size_t i = 0; i < n; ++i) {
    std::string_view w = kWords[rng.Below(kWords.size())];
    if (i == 0) {
      out.push_back(static_cast<char>(w[0] - 32));
      out.append(w.substr(1));
    } else {
      out.push_back(' ');
      out.append(w);
    }
    if (rng.Below(12) == 0) out.push_back(',');
  }
  out.append(rng.Below(5) == 0 ? "? " : ". ");
}

void Clinical(Rng& rng, std::string& out) {
  out += "BP " + std::to_string(90 + rng.Below(80)) + "/" + std::to_string(50 + rng.Below(50));
  out += " mmHg, HR " + std::to_string(50 + rng.Below(80)) + " bpm, SpO₂ ";
  out += std::to_string(85 + rng.Below(15)) + "% on RA. ";
  out += "Rx: " + std::string(kDrugs[rng.Below(kDrugs.size())]) + " ";
  out += std::to_string(5 * (1 + rng.Below(200))) + " mg PO q" + std::to_string(4 + rng.Below(21)) +
         "h × " + std::to_string(1 + rng.Below(14)) + " days; K+ " +
         std::to_string(3 + rng.Below(3)) + "." + std::to_string(rng.Below(10)) +
         " mmol/L (ref 3.5–5.1) ↓\n";
}

void Code(Rng& rng, std::string& out) {
  const std::string var = std::string(kDrugs[rng.Below(kDrugs.size())]) + "_dose";
  out += "def compute_" + var + "(weight_kg: float) -> float:\n";
  out += "    if weight_kg <= 0:\n        raise ValueError(\"bad weight\")\n";
  out += "    return " + std::to_string(rng.Below(100)) + ".5 * weight_kg  # mg/kg\n\n";
  out += "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * " + std::to_string(rng.Below(1000)) +
         ";\n}\n";
}

void Cjk(Rng& rng, std::string& out) {
  const size_t n = 10 + rng.Below(30);
  for (size_t i = 0; i < n; ++i) {
    // Common CJK ideographs, kana now and then.
    const char32_t cp = rng.Below(6) == 0 ? static_cast<char32_t>(0x3041 + rng.Below(0x56))
                                          : static_cast<char32_t>(0x4E00 + rng.Below(0x1000));
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
  out.append("。");
}

void Emoji(Rng& rng, std::string& out) {
  out.append("Great news ");
  const size_t n = 1 + rng.Below(4);
  for (size_t i = 0; i < n; ++i)
    out.append(kEmoji[rng.Below(kEmoji.size())]);
  out.append(" ");
}

}  // namespace

std::vector<std::string> MakeCorpus(size_t target_bytes, uint64_t seed) {
  Rng rng(seed);
  std::vector<std::string> docs;
  size_t total = 0;
  while (total < target_bytes) {
    std::string doc;
    while (doc.size() < 4096) {
      const size_t kind = rng.Below(20);
      if (kind < 9) {
        Prose(rng, doc);
      } else if (kind < 14) {
        Clinical(rng, doc);
      } else if (kind < 17) {
        Code(rng, doc);
      } else if (kind < 19) {
        Cjk(rng, doc);
      } else {
        Emoji(rng, doc);
      }
    }
    total += doc.size();
    docs.push_back(std::move(doc));
  }
  return docs;
}

}  // namespace medq::bench
