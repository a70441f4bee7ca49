// Log-probabilities end to end (issue 45): the socket's token events
// (params.logprobs), chat completions (logprobs, top_logprobs; plain and
// streamed) and completions (logprobs N), on tiny-qwen2 (a byte-level
// vocabulary). Each entry is its token: the ids it stands beside, the bytes
// that make the text, greedy choices at the top; and what cannot be
// answered is refused naming the field.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/generate_client.h"
#include "tests/e2e/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"

using nlohmann::json;

namespace medq::test {
namespace {

// The text the entries' bytes make.
std::string BytesOf(const json& entries) {
  std::string out;
  for (const json& e : entries)
    for (const json& b : e["bytes"])
      out.push_back(static_cast<char>(b.get<int>()));
  return out;
}

// What every entry of a greedy answer holds: its most likely token first,
// equal to it, alternatives in order, log-probabilities <= 0.
void CheckGreedyEntries(const json& entries, size_t alternatives, const char* top_key) {
  for (const json& e : entries) {
    INFO(e.dump());
    CHECK(e["logprob"].get<double>() <= 0);
    const json& top = e[top_key];
    REQUIRE(top.size() == alternatives);
    if (alternatives == 0) continue;
    CHECK(top[0]["token"] == e["token"]);
    CHECK(top[0]["logprob"] == e["logprob"]);
    for (size_t j = 1; j < top.size(); ++j)
      CHECK(top[j]["logprob"].get<double>() <= top[j - 1]["logprob"].get<double>());
  }
}

}  // namespace

TEST_CASE("logprobs: socket token events carry each token's, beside its id", "[e2e][logprobs]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  const json params = {{"model", "tiny-qwen2"}, {"prompt", "Once upon a time"}, {"mode", "raw"},
                       {"max_tokens", 10},      {"return_ids", true},           {"logprobs", 3}};
  const Run run = Generate(d.socket(), params);
  REQUIRE(run.final()["event"] == "done");
  json entries = json::array();
  std::vector<int32_t> ids;
  for (const json& e : run.events) {
    if (e["event"] != "token") continue;
    for (const json& entry : e.value("logprobs", json::array()))
      entries.push_back(entry);
    for (const json& id : e.value("ids", json::array()))
      ids.push_back(id.get<int32_t>());
  }
  // One entry a token but an end-of-sequence one (which has no text).
  const int completion = run.final()["usage"]["completion_tokens"];
  const size_t expected = run.final()["finish_reason"] == "stop" ? completion - 1 : completion;
  REQUIRE(entries.size() == expected);
  for (size_t i = 0; i < entries.size(); ++i)
    CHECK(entries[i]["id"] == ids[i]);
  CHECK(BytesOf(entries) == run.Text());
  CheckGreedyEntries(entries, 3, "top_logprobs");
  for (const json& entry : entries)
    CHECK(entry["top_logprobs"][0]["id"] == entry["id"]);

  // Without the parameter, none; out of range, refused naming it.
  const Run plain = Generate(d.socket(), {{"model", "tiny-qwen2"}, {"prompt", "Once"}});
  for (const json& e : plain.events)
    CHECK_FALSE(e.contains("logprobs"));
  json reply = CallOp(d.socket(), "generate",
                      {{"model", "tiny-qwen2"}, {"prompt", "Once"}, {"logprobs", 21}});
  CHECK(reply.value("code", "") == "INVALID_REQUEST");
  CHECK(reply.value("message", "").find("logprobs") != std::string::npos);
  reply = CallOp(d.socket(), "submit",
                 {{"op", "generate"},
                  {"params", {{"model", "tiny-qwen2"}, {"prompt", "Once"}, {"logprobs", 2}}}});
  CHECK(reply.value("code", "") == "INVALID_REQUEST");
  CHECK(reply.value("message", "").find("params.logprobs") != std::string::npos);
  // Token ids, which only token events carry, likewise; false is no request.
  reply = CallOp(d.socket(), "submit",
                 {{"op", "generate"},
                  {"params", {{"model", "tiny-qwen2"}, {"prompt", "Once"}, {"return_ids", true}}}});
  CHECK(reply.value("code", "") == "INVALID_REQUEST");
  CHECK(reply.value("message", "").find("params.return_ids") != std::string::npos);
  reply =
      CallOp(d.socket(), "submit",
             {{"op", "generate"},
              {"params", {{"model", "tiny-qwen2"}, {"prompt", "Once"}, {"return_ids", false}}}});
  INFO(reply.dump());
  CHECK(reply.value("event", "") == "result");
  CHECK(reply["result"].value("state", "") == "queued");
}

TEST_CASE("logprobs: chat and completions in OpenAI's shapes, streamed or not", "[e2e][logprobs]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));
  const json chat = {{"model", "tiny-qwen2"},
                     {"messages", {{{"role", "user"}, {"content", "Name a colour."}}}},
                     {"max_tokens", 8},
                     {"logprobs", true},
                     {"top_logprobs", 2}};
  const json out = Body(HttpCall(port, "POST", "/v1/chat/completions", chat.dump()));
  const json& choice = out["choices"][0];
  const json& content = choice["logprobs"]["content"];
  const int completion = out["usage"]["completion_tokens"];
  CHECK(content.size() ==
        static_cast<size_t>(choice["finish_reason"] == "stop" ? completion - 1 : completion));
  CHECK(BytesOf(content) == choice["message"]["content"].get<std::string>());
  CheckGreedyEntries(content, 2, "top_logprobs");

  // Streamed: the same entries, spread over the chunks.
  const HttpResponse streamed =
      HttpCall(port, "POST", "/v1/chat/completions", With(chat, {{"stream", true}}).dump());
  json spread = json::array();
  for (const std::string& data : streamed.Events()) {
    if (data == "[DONE]") continue;
    const json chunk = json::parse(data);
    const json& lp = chunk["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (const json& e : lp["content"])
      spread.push_back(e);
  }
  CHECK(spread == content);

  // Without logprobs the field is null; top_logprobs alone is refused.
  json plain = chat;
  plain.erase("logprobs");
  plain.erase("top_logprobs");
  CHECK(Body(HttpCall(port, "POST", "/v1/chat/completions", plain.dump()))["choices"][0]["logprobs"]
            .is_null());
  plain["top_logprobs"] = 2;
  HttpResponse refused = HttpCall(port, "POST", "/v1/chat/completions", plain.dump());
  CHECK(refused.status == 400);
  CHECK(Body(refused)["error"]["param"] == "top_logprobs");

  // Completions: four parallel arrays, offsets in bytes of the text.
  const json completion_req = {
      {"model", "tiny-qwen2"}, {"prompt", "Once upon a time"}, {"max_tokens", 6}, {"logprobs", 2}};
  const json c = Body(HttpCall(port, "POST", "/v1/completions", completion_req.dump()));
  const json& lp = c["choices"][0]["logprobs"];
  const std::string text = c["choices"][0]["text"];
  REQUIRE(lp["tokens"].size() == lp["token_logprobs"].size());
  REQUIRE(lp["tokens"].size() == lp["top_logprobs"].size());
  REQUIRE(lp["tokens"].size() == lp["text_offset"].size());
  std::string joined;
  for (size_t i = 0; i < lp["tokens"].size(); ++i) {
    CHECK(lp["text_offset"][i] == joined.size());
    joined += lp["tokens"][i].get<std::string>();
    CHECK(lp["token_logprobs"][i].get<double>() <= 0);
    CHECK(lp["top_logprobs"][i].size() <= 2);
    CHECK(lp["top_logprobs"][i].contains(lp["tokens"][i].get<std::string>()));
  }
  CHECK(joined == text);
  refused =
      HttpCall(port, "POST", "/v1/completions", With(completion_req, {{"logprobs", 21}}).dump());
  CHECK(refused.status == 400);
  refused =
      HttpCall(port, "POST", "/v1/completions", With(completion_req, {{"top_logprobs", 2}}).dump());
  CHECK(refused.status == 400);
  CHECK(Body(refused)["error"]["param"] == "top_logprobs");
}

}  // namespace medq::test
