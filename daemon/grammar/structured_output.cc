#include "daemon/grammar/structured_output.h"

#include <algorithm>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <xgrammar/xgrammar.h>

namespace medq::grammar {
namespace {

// One line, json.dumps's separators (see the header).
constexpr bool kAnyWhitespace = false;
const std::pair<std::string, std::string> kSeparators{", ", ": "};

// The calendar formats as the patterns medq enforces for them: RFC 3339
// dates that exist (days per month, February 29 in leap years only, years
// 0001-9999), times without a leap second and with at most six fractional
// digits. The grammar engine's own patterns allow February 31 and second 60,
// which validators (Python's among them) refuse.
constexpr const char* kYear = "([0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)";
constexpr const char* kMonthDay =
    "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|"
    "02-(0[1-9]|1[0-9]|2[0-8]))";
constexpr const char* kLeapYear =
    "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)";
constexpr const char* kTime =
    "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";

std::string DatePattern() {
  return std::string("(") + kYear + "-" + kMonthDay + "|" + kLeapYear + "-02-29)";
}

// Rewrites every string schema's format date / time / date-time into its
// pattern, throughout `schema` ($defs included).
void CalendarFormatsAsPatterns(nlohmann::ordered_json& schema) {
  if (schema.is_array()) {
    for (auto& item : schema)
      CalendarFormatsAsPatterns(item);
    return;
  }
  if (!schema.is_object()) return;
  if (auto it = schema.find("format"); it != schema.end() && it->is_string()) {
    const std::string format = it->get<std::string>();
    std::string pattern;
    if (format == "date") pattern = DatePattern();
    if (format == "time") pattern = kTime;
    if (format == "date-time") pattern = DatePattern() + "T" + kTime;
    if (!pattern.empty()) {
      schema.erase(it);
      schema["pattern"] = "^" + pattern + "$";
    }
  }
  for (auto& [key, value] : schema.items()) {
    // Values, not schemas: left as they are.
    if (key == "enum" || key == "const" || key == "default" || key == "examples") continue;
    CalendarFormatsAsPatterns(value);
  }
}

// Compiled grammars kept for reuse, per model.
constexpr int64_t kCacheBytes = int64_t{256} << 20;

// One sequence's matcher. The engine calls FillAllowed and Accept in turn,
// one step at a time.
class MatcherConstraint : public engine::TokenConstraint {
 public:
  MatcherConstraint(const xgrammar::CompiledGrammar& grammar, std::vector<int32_t> stop_ids)
      : matcher_(grammar, stop_ids), stop_ids_(std::move(stop_ids)) {}

  void FillAllowed(std::vector<int32_t>& allowed) override {
    // A run that goes on past the stop token (its caller stops on other
    // ids) may only repeat a stop token: the document is complete.
    if (matcher_.IsTerminated()) {
      std::fill(allowed.begin(), allowed.end(), 0);
      for (const int32_t id : stop_ids_) {
        allowed[static_cast<size_t>(id / 32)] |= static_cast<int32_t>(1u << (id % 32));
      }
      return;
    }
    int64_t shape[1] = {static_cast<int64_t>(allowed.size())};
    DLTensor t{};
    t.data = allowed.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = xgrammar::GetBitmaskDLType();
    t.shape = shape;
    t.strides = nullptr;
    t.byte_offset = 0;
    matcher_.FillNextTokenBitmask(&t);
  }

  void Accept(int32_t id) override {
    if (!matcher_.IsTerminated()) matcher_.AcceptToken(id);
  }

 private:
  xgrammar::GrammarMatcher matcher_;
  std::vector<int32_t> stop_ids_;
};

}  // namespace

struct StructuredOutput::Impl {
  Impl(xgrammar::TokenizerInfo info, std::vector<int32_t> stops)
      : compiler(info, static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u)),
                 /*cache_enabled=*/true, kCacheBytes),
        stop_ids(std::move(stops)) {}

  xgrammar::GrammarCompiler compiler;
  std::vector<int32_t> stop_ids;
};

StructuredOutput::StructuredOutput(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StructuredOutput::~StructuredOutput() = default;

Result<std::unique_ptr<StructuredOutput>> StructuredOutput::Create(
    const tokenizer::Tokenizer& tokenizer, int64_t vocab_size,
    const std::vector<int32_t>& stop_ids) {
  const auto in_vocab = [&](int32_t id) { return id >= 0 && id < vocab_size; };
  std::vector<int32_t> stops;
  std::copy_if(stop_ids.begin(), stop_ids.end(), std::back_inserter(stops), in_vocab);
  // Ids past the tokenizer's (a model's padded rows) are special: never
  // allowed. Ids of the tokenizer past the model's rows cannot be produced.
  const auto count = std::min<int64_t>(vocab_size, static_cast<int64_t>(tokenizer.VocabSize()));
  std::vector<std::string> vocab(static_cast<size_t>(count));
  for (int32_t id = 0; id < count; ++id) {
    const bool stop = std::find(stops.begin(), stops.end(), id) != stops.end();
    // An empty string marks a special token to the grammar engine.
    if (tokenizer.IsSpecial(id) && !stop) continue;
    vocab[static_cast<size_t>(id)] = tokenizer.TokenBytes(id).value_or(std::string());
  }
  try {
    xgrammar::TokenizerInfo info(vocab, xgrammar::VocabType::RAW, static_cast<int>(vocab_size),
                                 stops, /*add_prefix_space=*/false);
    return std::unique_ptr<StructuredOutput>(
        new StructuredOutput(std::make_unique<Impl>(std::move(info), std::move(stops))));
  } catch (const std::exception& e) {
    return Error(ErrorCode::kInternal,
                 std::string("structured output: reading the vocabulary failed: ") + e.what());
  }
}

Result<std::shared_ptr<engine::TokenConstraint>> StructuredOutput::Constrain(
    const ResponseFormat& format) {
  if (!format.constrained()) return std::shared_ptr<engine::TokenConstraint>();
  try {
    std::optional<xgrammar::CompiledGrammar> grammar;
    if (format.type == ResponseFormat::Type::kJsonObject) {
      // Any object (not any JSON value: OpenAI's json_object), written as a
      // schema's is; strict mode off so that it may hold any properties.
      grammar = impl_->compiler.CompileJSONSchema(R"({"type":"object"})", kAnyWhitespace,
                                                  std::nullopt, kSeparators, /*strict_mode=*/false);
    } else {
      // Strict: properties and items the schema does not name are refused.
      nlohmann::ordered_json schema = format.schema;
      CalendarFormatsAsPatterns(schema);
      grammar = impl_->compiler.CompileJSONSchema(schema.dump(), kAnyWhitespace, std::nullopt,
                                                  kSeparators, /*strict_mode=*/true);
    }
    return std::shared_ptr<engine::TokenConstraint>(
        std::make_shared<MatcherConstraint>(*grammar, impl_->stop_ids));
  } catch (const std::exception& e) {
    return InvalidField(
        "response_format",
        std::string("params.response_format: the schema cannot be enforced: ") + e.what());
  }
}

int64_t StructuredOutput::CacheBytes() const {
  return impl_->compiler.GetCacheSizeBytes();
}

}  // namespace medq::grammar
