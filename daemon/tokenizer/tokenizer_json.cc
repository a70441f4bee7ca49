#include "daemon/tokenizer/tokenizer_json.h"

namespace medq::tokenizer {
namespace {

using json = nlohmann::json;

// Forwards every event to nlohmann's DOM builder except those inside
// model.vocab (an object of ids) and model.merges (an array of merges).
class Sax {
 public:
  explicit Sax(TokenizerJson& out) : out_(out), dom_(out.doc, false) {}

  bool null() { return InTable() ? Bad() : dom_.null(); }
  bool boolean(bool v) { return InTable() ? Bad() : dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) {
    if (mode_ == Mode::kVocab) return AddId(v);
    return mode_ == Mode::kNone ? dom_.number_integer(v) : Bad();
  }
  bool number_unsigned(json::number_unsigned_t v) {
    if (mode_ == Mode::kVocab) {
      return v <= static_cast<json::number_unsigned_t>(INT32_MAX)
                 ? AddId(static_cast<json::number_integer_t>(v))
                 : Bad();
    }
    return mode_ == Mode::kNone ? dom_.number_unsigned(v) : Bad();
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return InTable() ? Bad() : dom_.number_float(v, s);
  }
  bool binary(json::binary_t& b) { return InTable() ? Bad() : dom_.binary(b); }
  bool string(json::string_t& s) {
    if (mode_ == Mode::kMerges) {
      if (merge_level_ == 1) {
        if (pair_.size() >= 2) return Bad();
        pair_.push_back(std::move(s));
        return true;
      }
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        error_ = "model.merges: merge \"" + s + "\" is not two tokens separated by one space";
        return false;
      }
      out_.tables.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
      return true;
    }
    return mode_ == Mode::kNone ? dom_.string(s) : Bad();
  }
  bool start_object(std::size_t n) {
    if (InTable()) return Bad();
    if (AtModelField("vocab")) {
      mode_ = Mode::kVocab;
      out_.tables.has_vocab = true;
      out_.tables.vocab.Reserve(n == static_cast<std::size_t>(-1) ? 1024 : n);
      return true;
    }
    Push();
    return dom_.start_object(n);
  }
  bool key(json::string_t& k) {
    if (mode_ == Mode::kVocab) {
      pending_key_ = std::move(k);
      return true;
    }
    if (InTable()) return Bad();
    keys_.back() = k;
    return dom_.key(k);
  }
  bool end_object() {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kNone;
      return dom_.null();
    }
    if (InTable()) return Bad();
    Pop();
    return dom_.end_object();
  }
  bool start_array(std::size_t n) {
    if (mode_ == Mode::kMerges) {
      if (merge_level_ != 0) return Bad();
      merge_level_ = 1;
      pair_.clear();
      return true;
    }
    if (InTable()) return Bad();
    if (AtModelField("merges")) {
      mode_ = Mode::kMerges;
      merge_level_ = 0;
      out_.tables.has_merges = true;
      return true;
    }
    Push();
    return dom_.start_array(n);
  }
  bool end_array() {
    if (mode_ == Mode::kMerges) {
      if (merge_level_ == 1) {
        if (pair_.size() != 2) return Bad();
        out_.tables.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
        merge_level_ = 0;
        return true;
      }
      mode_ = Mode::kNone;
      return dom_.null();
    }
    if (InTable()) return Bad();
    Pop();
    return dom_.end_array();
  }
  bool parse_error(std::size_t pos, const std::string& token,
                   const nlohmann::detail::exception& e) {
    if (error_.empty()) error_ = e.what();
    return dom_.parse_error(pos, token, e);
  }

  const std::string& error() const { return error_; }

 private:
  enum class Mode { kNone, kVocab, kMerges };

  bool InTable() const { return mode_ != Mode::kNone; }
  bool Bad() {
    if (error_.empty()) {
      error_ = mode_ == Mode::kVocab ? "model.vocab: entry \"" + pending_key_ + "\" has no valid id"
                                     : "model.merges: each merge must be \"a b\" or [\"a\", \"b\"]";
    }
    return false;
  }
  bool AddId(json::number_integer_t v) {
    if (v < 0 || v > INT32_MAX) return Bad();
    out_.tables.vocab.Insert(std::move(pending_key_), static_cast<int32_t>(v));
    return true;
  }
  // True when the value about to start is root["model"][field].
  bool AtModelField(const char* field) const {
    return keys_.size() == 2 && keys_[0] == "model" && keys_[1] == field;
  }
  void Push() { keys_.emplace_back(); }
  void Pop() {
    if (!keys_.empty()) keys_.pop_back();
  }

  TokenizerJson& out_;
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  // keys_[d]: the last key seen in the container at depth d + 1.
  std::vector<std::string> keys_;
  Mode mode_ = Mode::kNone;
  std::string pending_key_;
  int merge_level_ = 0;
  std::vector<std::string> pair_;
  std::string error_;
};

}  // namespace

Result<TokenizerJson> ReadTokenizerJson(std::string_view text) {
  TokenizerJson out;
  Sax sax(out);
  const bool ok = json::sax_parse(text.begin(), text.end(), &sax);
  if (!ok || out.doc.is_discarded()) {
    return Error(ErrorCode::kInvalidRequest,
                 "not valid tokenizer JSON" + (sax.error().empty() ? "" : ": " + sax.error()));
  }
  return out;
}

}  // namespace medq::tokenizer
