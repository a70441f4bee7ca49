// Several answers to one request (params.n, HTTP "n"; issue 45): the
// choices decode side by side in one batch, choice i seeded seed + i, so
// each equals a request of its own with that seed; events carry their
// index, one done carries every choice's end, and HTTP renders one choice
// each, streamed or not.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/e2e/generate_client.h"
#include "tests/e2e/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"

using nlohmann::json;

namespace medq::test {
TEST_CASE("choices: n answers on the socket, each as its own seed gives it", "[e2e][choices]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  const json params = {{"model", "tiny-qwen2"},
                       {"prompt", "Once upon a time"},
                       {"mode", "raw"},
                       {"max_tokens", 8},
                       {"temperature", 0.9},
                       {"seed", 11},
                       {"n", 3},
                       {"logprobs", 1}};
  const Run run = Generate(d.socket(), params);
  REQUIRE(run.final()["event"] == "done");
  std::map<int, std::string> texts;
  std::map<int, size_t> entries;
  for (const json& e : run.events) {
    if (e["event"] != "token") continue;
    REQUIRE(e.contains("index"));
    texts[e["index"].get<int>()] += e.value("text", "");
    entries[e["index"].get<int>()] += e.value("logprobs", json::array()).size();
  }
  const json& done = run.final();
  REQUIRE(done["choices"].size() == 3);
  int64_t total = 0;
  for (int i = 0; i < 3; ++i) {
    INFO("choice " << i);
    const json& c = done["choices"][i];
    CHECK(c["index"] == i);
    total += c["completion_tokens"].get<int64_t>();
    const Run alone = Generate(d.socket(), With(params, {{"n", 1}, {"seed", 11 + i}}));
    CHECK(texts[i] == alone.Text());
    CHECK(c["finish_reason"] == alone.final()["finish_reason"]);
    CHECK(c["completion_tokens"] == alone.final()["usage"]["completion_tokens"]);
    CHECK(entries[i] > 0);
  }
  CHECK(done["usage"]["completion_tokens"] == total);
  CHECK(done["finish_reason"] == done["choices"][0]["finish_reason"]);

  // One answer: no index, no choices. Out of range, or submitted: refused.
  const Run one = Generate(d.socket(), With(params, {{"n", 1}}));
  CHECK_FALSE(one.final().contains("choices"));
  for (const json& e : one.events)
    CHECK_FALSE(e.contains("index"));
  json reply = CallOp(d.socket(), "generate", With(params, {{"n", 9}}));
  CHECK(reply.value("code", "") == "INVALID_REQUEST");
  CHECK(reply.value("message", "").find("params.n") != std::string::npos);
  json submitted = params;
  submitted.erase("logprobs");
  reply = CallOp(d.socket(), "submit", {{"op", "generate"}, {"params", submitted}});
  CHECK(reply.value("code", "") == "INVALID_REQUEST");
  CHECK(reply.value("message", "").find("params.n") != std::string::npos);
}

TEST_CASE("choices: chat and completions with n, streamed or not", "[e2e][choices]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));
  for (const bool chat : {true, false}) {
    INFO((chat ? "chat" : "completions"));
    const std::string path = chat ? "/v1/chat/completions" : "/v1/completions";
    json request = {
        {"model", "tiny-qwen2"}, {"max_tokens", 6}, {"temperature", 0.8}, {"seed", 3}, {"n", 2}};
    if (chat) {
      request["messages"] = {{{"role", "user"}, {"content", "Tell a story."}}};
    } else {
      request["prompt"] = "Once upon a time";
    }
    const json whole = Body(HttpCall(port, "POST", path, request.dump()));
    REQUIRE(whole["choices"].size() == 2);
    std::map<int, std::string> expected;
    for (const json& c : whole["choices"]) {
      expected[c["index"].get<int>()] =
          chat ? c["message"]["content"].get<std::string>() : c["text"].get<std::string>();
      CHECK(c["finish_reason"] == "length");
    }
    CHECK(expected.size() == 2);
    CHECK(whole["usage"]["completion_tokens"] == 12);
    // Choice 1 is what the request gives alone with seed + 1.
    const json alone =
        Body(HttpCall(port, "POST", path, With(request, {{"n", 1}, {"seed", 4}}).dump()));
    CHECK(expected[1] ==
          (chat ? alone["choices"][0]["message"]["content"] : alone["choices"][0]["text"])
              .get<std::string>());

    const HttpResponse streamed =
        HttpCall(port, "POST", path, With(request, {{"stream", true}}).dump());
    std::map<int, std::string> texts;
    std::map<int, int> finishes;
    for (const std::string& data : streamed.Events()) {
      if (data == "[DONE]") continue;
      const json chunk = json::parse(data);
      for (const json& c : chunk["choices"]) {
        const int i = c["index"];
        texts[i] += chat ? c["delta"].value("content", "") : c.value("text", "");
        if (!c["finish_reason"].is_null()) ++finishes[i];
      }
    }
    CHECK(texts == expected);
    CHECK(finishes == std::map<int, int>{{0, 1}, {1, 1}});
  }
  const HttpResponse refused =
      HttpCall(port, "POST", "/v1/completions", json{{"prompt", "a"}, {"n", 9}}.dump());
  CHECK(refused.status == 400);
  CHECK(Body(refused)["error"]["param"] == "n");
}

}  // namespace medq::test
