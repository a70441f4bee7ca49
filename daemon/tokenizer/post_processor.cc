#include "daemon/tokenizer/post_processor.h"

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "daemon/tokenizer/json_numbers.h"
#include "daemon/tokenizer/model.h"

namespace medq::tokenizer {
namespace {

std::vector<int32_t> Concat(const std::vector<int32_t>& a, const std::vector<int32_t>* b) {
  std::vector<int32_t> out = a;
  if (b != nullptr) out.insert(out.end(), b->begin(), b->end());
  return out;
}

// ByteLevel only adjusts offsets, which medq does not expose.
class PassThroughProcessor : public PostProcessor {
 public:
  std::vector<int32_t> Process(const std::vector<int32_t>& a, const std::vector<int32_t>* b,
                               bool) const override {
    return Concat(a, b);
  }
};

// One template item: a sequence ('A' or 'B') or the ids of a special token.
struct TemplateItem {
  bool is_sequence = false;
  bool is_b = false;
  std::vector<int32_t> ids;
};

class TemplateProcessor : public PostProcessor {
 public:
  TemplateProcessor(std::vector<TemplateItem> single, std::vector<TemplateItem> pair)
      : single_(std::move(single)), pair_(std::move(pair)) {}
  std::vector<int32_t> Process(const std::vector<int32_t>& a, const std::vector<int32_t>* b,
                               bool add_special_tokens) const override {
    if (!add_special_tokens) return Concat(a, b);
    std::vector<int32_t> out;
    for (const auto& item : b == nullptr ? single_ : pair_) {
      if (item.is_sequence) {
        const auto& seq = item.is_b && b != nullptr ? *b : a;
        out.insert(out.end(), seq.begin(), seq.end());
      } else {
        out.insert(out.end(), item.ids.begin(), item.ids.end());
      }
    }
    return out;
  }

 private:
  std::vector<TemplateItem> single_, pair_;
};

class SequenceProcessor : public PostProcessor {
 public:
  explicit SequenceProcessor(std::vector<std::unique_ptr<PostProcessor>> items)
      : items_(std::move(items)) {}
  std::vector<int32_t> Process(const std::vector<int32_t>& a, const std::vector<int32_t>* b,
                               bool add_special_tokens) const override {
    // Every supported stage is either pass-through (ByteLevel: offsets only)
    // or combines the sequences (a template); the first combining stage wins,
    // since after it there is one sequence left to pass through.
    for (const auto& p : items_) {
      if (dynamic_cast<const PassThroughProcessor*>(p.get()) != nullptr) continue;
      return p->Process(a, b, add_special_tokens);
    }
    return Concat(a, b);
  }

 private:
  std::vector<std::unique_ptr<PostProcessor>> items_;
};

Error BadPostProcessor(const std::string& what) {
  return Error(ErrorCode::kInvalidRequest, "post_processor " + what);
}

// Parses a template: either ["$A", "[SEP]"] strings or the
// [{"Sequence": {"id": "A"}}, {"SpecialToken": {"id": "[SEP]"}}] form.
Result<std::vector<TemplateItem>> ParseTemplate(
    const nlohmann::json& j, const std::map<std::string, std::vector<int32_t>>& specials) {
  std::vector<TemplateItem> items;
  if (j.is_string()) {
    // "[CLS] $A [SEP]": space-separated items.
    nlohmann::json arr = nlohmann::json::array();
    const std::string s = j.get<std::string>();
    size_t pos = 0;
    while (pos < s.size()) {
      const size_t end = std::min(s.find(' ', pos), s.size());
      if (end > pos) arr.push_back(s.substr(pos, end - pos));
      pos = end + 1;
    }
    return ParseTemplate(arr, specials);
  }
  if (!j.is_array()) return BadPostProcessor("TemplateProcessing: template must be an array");
  for (const auto& e : j) {
    std::string special;
    TemplateItem item;
    if (e.is_string()) {
      std::string s = e.get<std::string>();
      if (const size_t colon = s.find(':'); colon != std::string::npos) s = s.substr(0, colon);
      if (s == "$A" || s == "$B" || s == "$") {
        item.is_sequence = true;
        item.is_b = s == "$B";
      } else {
        special = s;
      }
    } else if (e.is_object() && e.contains("Sequence")) {
      item.is_sequence = true;
      item.is_b = e["Sequence"].value("id", std::string("A")) == "B";
    } else if (e.is_object() && e.contains("SpecialToken")) {
      special = e["SpecialToken"].at("id").get<std::string>();
    } else {
      return BadPostProcessor(std::string("TemplateProcessing: unknown template item of type ") +
                              e.type_name());
    }
    if (!item.is_sequence) {
      const auto it = specials.find(special);
      if (it == specials.end()) {
        return BadPostProcessor("TemplateProcessing: special token \"" + special +
                                "\" is missing from \"special_tokens\"");
      }
      item.ids = it->second;
    }
    items.push_back(std::move(item));
  }
  return items;
}

std::vector<TemplateItem> Items(std::initializer_list<std::vector<int32_t>> parts) {
  // Empty vector marks a sequence slot; the k-th slot is A then B.
  std::vector<TemplateItem> items;
  int seq = 0;
  for (const auto& p : parts) {
    TemplateItem it;
    if (p.empty()) {
      it.is_sequence = true;
      it.is_b = seq++ > 0;
    } else {
      it.ids = p;
    }
    items.push_back(std::move(it));
  }
  return items;
}

}  // namespace

Result<std::unique_ptr<PostProcessor>> ParsePostProcessor(const nlohmann::json& j, int depth) {
  if (depth > kMaxNesting) {
    return Error(ErrorCode::kInvalidRequest, "post_processor: Sequence nested deeper than " +
                                                 std::to_string(kMaxNesting) + " levels");
  }

  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) {
    return BadPostProcessor("must be an object with a \"type\"");
  }
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return std::unique_ptr<PostProcessor>(new PassThroughProcessor());
  if (type == "TemplateProcessing") {
    std::map<std::string, std::vector<int32_t>> specials;
    if (j.contains("special_tokens")) {
      for (const auto& [name, st] : j["special_tokens"].items()) {
        std::vector<int32_t>& ids = specials[name];
        for (const auto& id : st.at("ids")) {
          const std::optional<int32_t> valid = TokenIdOf(id);
          if (!valid)
            return BadPostProcessor("TemplateProcessing: special token \"" + name +
                                    "\" has an invalid id");
          ids.push_back(*valid);
        }
      }
    }
    auto single = ParseTemplate(j.at("single"), specials);
    if (!single.ok()) return std::move(single).error();
    auto pair = ParseTemplate(j.at("pair"), specials);
    if (!pair.ok()) return std::move(pair).error();
    return std::unique_ptr<PostProcessor>(
        new TemplateProcessor(std::move(single).value(), std::move(pair).value()));
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    // "sep": ["[SEP]", 102], "cls": ["[CLS]", 101]
    const std::optional<int32_t> sep = TokenIdOf(j.at("sep").at(1));
    const std::optional<int32_t> cls = TokenIdOf(j.at("cls").at(1));
    if (!sep || !cls) return BadPostProcessor(type + ": \"sep\" and \"cls\" need valid ids");
    if (type == "BertProcessing") {
      return std::unique_ptr<PostProcessor>(new TemplateProcessor(
          Items({{*cls}, {}, {*sep}}), Items({{*cls}, {}, {*sep}, {}, {*sep}})));
    }
    return std::unique_ptr<PostProcessor>(new TemplateProcessor(
        Items({{*cls}, {}, {*sep}}), Items({{*cls}, {}, {*sep}, {*sep}, {}, {*sep}})));
  }
  if (type == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> items;
    for (const auto& item : j.at("processors")) {
      auto p = ParsePostProcessor(item, depth + 1);
      if (!p.ok()) return std::move(p).error();
      items.push_back(std::move(p).value());
    }
    return std::unique_ptr<PostProcessor>(new SequenceProcessor(std::move(items)));
  }
  return Error(ErrorCode::kInvalidRequest, "unsupported post_processor type \"" + type + "\"");
}

}  // namespace medq::tokenizer
