// POST /v1/embeddings: an embed request (StartEmbedJob, loop/entry_points.h). OpenAI's `input` (a
// string or a list of strings), `model`, `dimensions` and `encoding_format` ("float", or "base64":
// the little-endian float32 bytes of each vector in base64).
#include <cstring>

#include "daemon/http/routes.h"

namespace medq::daemon::http {
namespace {

using nlohmann::json;

std::string Base64(const std::vector<float>& values) {
  static constexpr char kTable[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(values.size() * sizeof(float), '\0');
  // x86-64 and arm64 are little-endian: the floats' bytes are the wire's.
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const auto n = (static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16) |
                   (static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8) |
                   static_cast<uint8_t>(bytes[i + 2]);
    out += kTable[(n >> 18) & 63];
    out += kTable[(n >> 12) & 63];
    out += kTable[(n >> 6) & 63];
    out += kTable[n & 63];
  }
  if (i < bytes.size()) {
    uint32_t n = static_cast<uint32_t>(static_cast<uint8_t>(bytes[i])) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
    out += kTable[(n >> 18) & 63];
    out += kTable[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kTable[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace

void Embeddings(DaemonState& s, const HttpRequest& request, std::shared_ptr<HttpExchange> ex) {
  auto body = ParseBody(request);
  if (!body.ok()) return ex->RespondError(body.error());
  Params p = Params::object();
  const Params input = body->value("input", Params(nullptr));
  const bool strings =
      input.is_string() ||
      (input.is_array() && !input.empty() &&
       std::all_of(input.begin(), input.end(), [](const Params& t) { return t.is_string(); }));
  if (!strings) {
    return ex->RespondError(InvalidField("input",
                                         "'input' must be a string or a non-empty array of strings "
                                         "(token ids are not supported)"));
  }
  p["input"] = input;
  for (auto [name, kind] : {std::pair{"model", Kind::kString},
                            {"dimensions", Kind::kInteger},
                            {"priority", Kind::kString},
                            {"queue_timeout_s", Kind::kNumber},
                            {"timeout_s", Kind::kNumber}}) {
    if (Status st = CopyField(*body, name, kind, p); !st.ok()) return ex->RespondError(st.error());
  }
  if (Status st = CheckField(*body, "encoding_format", Kind::kString); !st.ok()) {
    return ex->RespondError(st.error());
  }
  const std::string format = body->value("encoding_format", Params("float")).is_string()
                                 ? body->value("encoding_format", std::string("float"))
                                 : "float";
  if (format != "float" && format != "base64") {
    return ex->RespondError(
        InvalidField("encoding_format", "'encoding_format' must be \"float\" or \"base64\""));
  }
  auto embed = ParseEmbedRequest(p);
  if (!embed.ok()) return ex->RespondError(embed.error());
  if (Status st = RefuseWhileDraining(s); !st.ok()) return ex->RespondError(st.error());
  HttpExchange::Handlers handlers;
  handlers.embedded = [base64 = format == "base64"](HttpExchange& e, const EmbedResult& result) {
    json data = json::array();
    for (size_t i = 0; i < result.embeddings.size(); ++i) {
      json item = {{"object", "embedding"}, {"index", i}};
      if (base64) {
        item["embedding"] = Base64(result.embeddings[i]);
      } else {
        item["embedding"] = result.embeddings[i];
      }
      data.push_back(std::move(item));
    }
    const int64_t tokens = result.usage.total_tokens;
    e.RespondJson(200, {{"object", "list"},
                        {"data", std::move(data)},
                        {"model", result.model},
                        {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
  };
  ex->set_handlers(std::move(handlers));
  StartEmbedJob(s, std::move(*embed), ReplyTo(s, ex, "embed"), HttpIntake(*ex));
}

}  // namespace medq::daemon::http
