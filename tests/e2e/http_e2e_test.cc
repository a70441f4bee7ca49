// The OpenAI-compatible HTTP endpoint end to end (docs/http.md): a real
// daemon with the fixture models and --http-listen, driven by a raw HTTP
// client: the routes against the socket's own answers, errors and their
// statuses, the limits, keep-alive and pipelining, cancel on disconnect, and
// API keys. The official `openai` client is tests/http/openai_client_test.py.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/e2e/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"
#include "tests/support/skip.h"

namespace medq::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

const fs::path kEmbeddingData = fs::path(MEDQ_EMBEDDING_TEST_DATA);

// The fixture models plus tiny-bert for embeddings.
void AddTinyBert(const ModelRepo& repo) {
  repo.AddModel("tiny-bert", kEmbeddingData / "tiny-bert");
}

// `base` with the fields of `extra` added or replaced.
// The text a streamed completion's events carry, and the last chunk's
// finish_reason.
std::string StreamText(const HttpResponse& r, bool chat, std::string* finish = nullptr) {
  std::string text;
  const std::vector<std::string> events = r.Events();
  REQUIRE(!events.empty());
  CHECK(events.back() == "[DONE]");
  for (const std::string& e : events) {
    if (e == "[DONE]") continue;
    json chunk = json::parse(e);
    if (chunk["choices"].empty()) continue;
    const json& choice = chunk["choices"][0];
    text += chat ? choice["delta"].value("content", "") : choice.value("text", "");
    if (finish != nullptr && !choice["finish_reason"].is_null()) *finish = choice["finish_reason"];
  }
  return text;
}

}  // namespace

TEST_CASE("http: completions and chat equal the socket's generate, streamed or not",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));

  // A raw prompt, sampled with a seed: the same text as the socket's generate.
  const json sampled = {{"prompt", "Once upon a time"},
                        {"max_tokens", 12},
                        {"temperature", 0.9},
                        {"top_p", 0.95},
                        {"seed", 42}};
  Run socket_run = Generate(d.socket(), With(sampled, {{"mode", "raw"}}));
  REQUIRE(socket_run.final()["event"] == "done");
  HttpResponse plain = HttpCall(port, "POST", "/v1/completions", sampled.dump());
  REQUIRE(plain.status == 200);
  CHECK(plain.headers.count("x-medq-job") == 1);
  CHECK(plain.headers.count("x-medq-queue-ms") == 1);
  json out = Body(plain);
  CHECK(out["object"] == "text_completion");
  CHECK(out["choices"][0]["text"] == socket_run.Text());
  CHECK(out["choices"][0]["finish_reason"] == "length");
  CHECK(out["usage"]["completion_tokens"] == 12);
  CHECK(out["usage"]["total_tokens"] ==
        out["usage"]["prompt_tokens"].get<int>() + out["usage"]["completion_tokens"].get<int>());
  CHECK(out["model"] == "tiny-llama");

  HttpResponse streamed =
      HttpCall(port, "POST", "/v1/completions", With(sampled, {{"stream", true}}).dump());
  REQUIRE(streamed.status == 200);
  CHECK(streamed.headers["content-type"] == "text/event-stream");
  CHECK(StreamText(streamed, false) == socket_run.Text());

  // Chat through the model's template (tiny-qwen2 has one).
  const json messages = json::array({{{"role", "user"}, {"content", "Hi"}}});
  Run chat_run =
      Generate(d.socket(), {{"model", "tiny-qwen2"}, {"messages", messages}, {"max_tokens", 8}});
  REQUIRE(chat_run.final()["event"] == "done");
  const json chat = {{"model", "tiny-qwen2"}, {"messages", messages}, {"max_tokens", 8}};
  HttpResponse c1 = HttpCall(port, "POST", "/v1/chat/completions", chat.dump());
  REQUIRE(c1.status == 200);
  json c1_body = Body(c1);
  CHECK(c1_body["object"] == "chat.completion");
  CHECK(c1_body["choices"][0]["message"]["role"] == "assistant");
  CHECK(c1_body["choices"][0]["message"]["content"] == chat_run.Text());
  // Content as a list of text parts is the same conversation.
  json parts = chat;
  parts["messages"][0]["content"] = json::array({{{"type", "text"}, {"text", "Hi"}}});
  CHECK(Body(HttpCall(port, "POST", "/v1/chat/completions",
                      parts.dump()))["choices"][0]["message"]["content"] == chat_run.Text());

  HttpResponse c2 = HttpCall(
      port, "POST", "/v1/chat/completions",
      With(chat, {{"stream", true}, {"stream_options", {{"include_usage", true}}}}).dump());
  REQUIRE(c2.status == 200);
  std::string finish;
  CHECK(StreamText(c2, true, &finish) == chat_run.Text());
  CHECK(finish == "length");
  const std::vector<std::string> events = c2.Events();
  REQUIRE(events.size() >= 3);
  json usage_chunk = json::parse(events[events.size() - 2]);
  CHECK(usage_chunk["choices"].empty());
  CHECK(usage_chunk["usage"]["completion_tokens"] == 8);
  CHECK(json::parse(events[0])["choices"][0]["delta"]["role"] == "assistant");

  // Stop strings end the text before them.
  const std::string full = socket_run.Text();
  REQUIRE(full.size() > 4);
  const std::string stop = full.substr(full.size() / 2, 2);
  json stopped =
      Body(HttpCall(port, "POST", "/v1/completions", With(sampled, {{"stop", stop}}).dump()));
  CHECK(stopped["choices"][0]["finish_reason"] == "stop");
  CHECK(stopped["choices"][0]["text"] == full.substr(0, full.find(stop)));

  // Models, health, metrics.
  json models = Body(HttpCall(port, "GET", "/v1/models"));
  CHECK(models["object"] == "list");
  bool found = false;
  for (const json& m : models["data"])
    found = found || (m["id"] == "tiny-qwen2" && m["object"] == "model");
  CHECK(found);
  HttpResponse health = HttpCall(port, "GET", "/health");
  CHECK(health.status == 200);
  CHECK(Body(health)["ready"] == true);
  CHECK(Body(health)["connections"] >= 1);  // HTTP connections count too
  HttpResponse metrics = HttpCall(port, "GET", "/metrics");
  CHECK(metrics.status == 200);
  CHECK(metrics.headers["content-type"].rfind("text/plain", 0) == 0);
  CHECK(metrics.body.find("medq_") != std::string::npos);
}

// A model without a chat template of its own (a base model; tiny-llama
// here): chat goes through the fallback template, as on the socket.
TEST_CASE("http: chat with a model without a chat template uses the fallback template",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));
  const json messages = json::array({{{"role", "user"}, {"content", "Who is the LORD?"}}});
  Run socket_run =
      Generate(d.socket(), {{"model", "tiny-llama"}, {"messages", messages}, {"max_tokens", 8}});
  REQUIRE(socket_run.final()["event"] == "done");
  const json chat = {{"model", "tiny-llama"}, {"messages", messages}, {"max_tokens", 8}};
  HttpResponse r = HttpCall(port, "POST", "/v1/chat/completions", chat.dump());
  REQUIRE(r.status == 200);
  json body = Body(r);
  CHECK(body["object"] == "chat.completion");
  CHECK(body["model"] == "tiny-llama");
  CHECK(body["choices"][0]["message"]["content"] == socket_run.Text());
  CHECK(body["usage"]["prompt_tokens"] == socket_run.final()["usage"]["prompt_tokens"]);
  HttpResponse streamed =
      HttpCall(port, "POST", "/v1/chat/completions", With(chat, {{"stream", true}}).dump());
  REQUIRE(streamed.status == 200);
  CHECK(StreamText(streamed, true) == socket_run.Text());
  // The health object says which template chat uses.
  HttpResponse health = HttpCall(port, "GET", "/health");
  REQUIRE(health.status == 200);
  CHECK_THAT(Body(health)["warnings"].dump(),
             Catch::Contains("model tiny-llama has no chat template; chat uses the fallback"));
  // The built-in medq-demo chats through a template of its own (the turns
  // as plain paragraphs after its end-of-text token): no warning for it.
  const Run demo =
      Generate(d.socket(), {{"model", "medq-demo"}, {"messages", messages}, {"max_tokens", 4}});
  REQUIRE(demo.final()["event"] == "done");
  CHECK(Body(HttpCall(port, "GET", "/health"))["warnings"].dump().find("medq-demo") ==
        std::string::npos);
}

TEST_CASE("http: GET /v1/models/{id} answers a model, and 404 for another", "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));
  const HttpResponse found = HttpCall(port, "GET", "/v1/models/tiny-llama");
  INFO(found.body);
  REQUIRE(found.status == 200);
  CHECK(Body(found) ==
        json{{"id", "tiny-llama"}, {"object", "model"}, {"created", 0}, {"owned_by", "medq"}});
  CHECK(HttpCall(port, "GET", "/v1/models/tiny%2Dllama").status == 200);  // percent-decoded
  RequireError(HttpCall(port, "GET", "/v1/models/no-such-model"), 404, "model");
  // A quantization suffix names the same folder loaded so (model_resolver.h).
  const HttpResponse suffixed = HttpCall(port, "GET", "/v1/models/tiny-llama:int4");
  REQUIRE(suffixed.status == 200);
  CHECK(Body(suffixed)["id"] == "tiny-llama:int4");
  RequireError(HttpCall(port, "GET", "/v1/models/tiny-llama:int9"), 404, "model");
  RequireError(HttpCall(port, "GET", "/v1/models/no-such-model:int4"), 404, "model");
  RequireError(HttpCall(port, "GET", "/v1/models/a/b"), 404, "model");
  RequireError(HttpCall(port, "GET", "/v1/models/%ff"), 404, "model");
  CHECK(HttpCall(port, "DELETE", "/v1/models/tiny-llama").status == 405);
}

TEST_CASE("http: an assistant turn that only calls tools, content null, is rendered",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));
  // What the openai client sends back after a tool call: the assistant's
  // turn with tool_calls and "content": null, then the tool's answer. The
  // Qwen template tests the content with `in`, which a null fails.
  const json messages = json::array(
      {{{"role", "user"}, {"content", "What is the weather in Paris?"}},
       {{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         {{{"id", "call_1"},
           {"type", "function"},
           {"function", {{"name", "weather"}, {"arguments", "{\"city\":\"Paris\"}"}}}}}}},
       {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}}});
  const HttpResponse r =
      HttpCall(port, "POST", "/v1/chat/completions",
               json{{"model", "tiny-qwen2"}, {"messages", messages}, {"max_tokens", 3}}.dump());
  INFO(r.body);
  REQUIRE(r.status == 200);
  CHECK(Body(r)["choices"][0]["message"]["role"] == "assistant");
}

// A request with tools streams the text that cannot be a call as it comes
// (not all at the end); its pieces make the answer's content, and the calls,
// if any, come after.
TEST_CASE("http: a chat stream that may call tools sends its plain text as it comes",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));
  const json tools =
      json::array({{{"type", "function"},
                    {"function",
                     {{"name", "weather"},
                      {"parameters",
                       {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}}});
  json request = {{"model", "tiny-qwen2"},
                  {"messages", {{{"role", "user"}, {"content", "Say something."}}}},
                  {"tools", tools},
                  {"max_tokens", 16}};
  const json whole = Body(HttpCall(port, "POST", "/v1/chat/completions", request.dump()));
  const json& message = whole["choices"][0]["message"];
  request["stream"] = true;
  const HttpResponse streamed = HttpCall(port, "POST", "/v1/chat/completions", request.dump());
  REQUIRE(streamed.status == 200);
  std::string content;
  int pieces = 0;
  int calls = 0;
  for (const std::string& data : streamed.Events()) {
    if (data == "[DONE]") continue;
    const json chunk = json::parse(data);
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("tool_calls")) ++calls;
    const std::string piece = delta.value("content", "");
    if (!piece.empty()) {
      content += piece;
      ++pieces;
    }
  }
  INFO(whole.dump());
  CHECK(calls == static_cast<int>(message.value("tool_calls", json::array()).size()));
  if (calls == 0) {
    CHECK(content == message["content"].get<std::string>());
    // Random weights answer with words, not a JSON call: then the words
    // arrive as they are made, several pieces before the end.
    const std::string text = message["content"];
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] != '{' && text[first] != '[' &&
        whole["usage"]["completion_tokens"].get<int>() > 4) {
      CHECK(pieces >= 2);
    }
  }
}

TEST_CASE("http: errors are OpenAI error objects with the field's status", "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port, {"--max-message-bytes", "4096"}));
  RequireError(HttpCall(port, "POST", "/v1/completions", "{\"prompt\": "), 400);
  RequireError(HttpCall(port, "POST", "/v1/completions", "[1,2]"), 400);
  RequireError(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"a","temperature":"hot"})"),
               400, "temperature");
  RequireError(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"a","max_tokens":-3})"), 400,
               "max_tokens");
  RequireError(HttpCall(port, "POST", "/v1/chat/completions", R"({"model":"tiny-llama"})"), 400,
               "messages");
  RequireError(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"a","n":9})"), 400, "n");
  RequireError(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"a","n":"2"})"), 400, "n");
  RequireError(HttpCall(port, "POST", "/v1/chat/completions",
                        R"({"messages":[{"role":"user","content":"a"}],"logprobs":"yes"})"),
               400, "logprobs");
  RequireError(HttpCall(port, "POST", "/v1/chat/completions",
                        R"({"messages":[{"role":"user","content":"a"}],"top_logprobs":3})"),
               400, "top_logprobs");
  RequireError(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"a","model":"no-such"})"),
               404);
  // A field medq does not read is 400 naming it, never ignored; the ones
  // that ask for nothing (a user id, penalties of 0, no bias) are taken.
  CHECK(HttpCall(port, "POST", "/v1/completions",
                 R"({"prompt":"a","max_tokens":1,"user":"u","frequency_penalty":0,)"
                 R"("presence_penalty":0,"logit_bias":{}})")
            .status == 200);
  RequireError(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"a","x":{}})"), 400, "x");
  RequireError(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"a","frequency_penalty":1})"),
               400, "frequency_penalty");
  RequireError(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"a","logit_bias":{"5":1}})"),
               400, "logit_bias");
  RequireError(HttpCall(port, "POST", "/v1/chat/completions",
                        R"({"messages":[{"role":"user","content":"a"}],"functions":[]})"),
               400, "functions");
  RequireError(HttpCall(port, "POST", "/v1/chat/completions",
                        R"({"messages":[{"role":"user","content":"a"}],"tool_choice":"required"})"),
               400, "tool_choice");
  RequireError(HttpCall(port, "POST", "/v1/completions", R"({"prompt":"a","tools":[]})"), 400,
               "tools");
  // Routes and methods.
  RequireError(HttpCall(port, "GET", "/v1/nothing"), 404);
  HttpResponse wrong = HttpCall(port, "DELETE", "/v1/models");
  RequireError(wrong, 405);
  CHECK(wrong.headers["allow"] == "GET, HEAD");
  RequireError(HttpCall(port, "GET", "/v1/completions"), 405);
  // HEAD: the head of GET, without the body.
  HttpResponse head = HttpCall(port, "HEAD", "/health");
  CHECK(head.status == 200);
  CHECK(std::stoul(head.headers["content-length"]) > 0);
  CHECK(head.body.empty());
  // A body over max_message_bytes: 413, said before the body is read.
  HttpResponse huge =
      HttpCall(port, "POST", "/v1/completions", "{\"prompt\":\"" + std::string(8000, 'a') + "\"}");
  RequireError(huge, 413);
  // A chunked body over the limit too.
  {
    HttpClient c(port);
    c.Send(
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n"
        "1f40\r\n" +
        std::string(8000, 'a') + "\r\n0\r\n\r\n");
    auto r = c.Read(10s);
    REQUIRE(r.has_value());
    CHECK(r->status == 413);
  }
  // Too many headers: 431.
  {
    std::string headers;
    for (int i = 0; i < 150; ++i)
      headers += "x-h" + std::to_string(i) + ": v\r\n";
    HttpClient c(port);
    c.Send("GET /health HTTP/1.1\r\nhost: x\r\n" + headers + "\r\n");
    auto r = c.Read(10s);
    REQUIRE(r.has_value());
    CHECK(r->status == 431);
  }
  // Not HTTP at all: 400 and the connection closes.
  {
    HttpClient c(port);
    c.Send("\x01\x02 garbage\r\n\r\n");
    auto r = c.Read(10s);
    REQUIRE(r.has_value());
    CHECK(r->status == 400);
    CHECK(c.ClosedWithin(5s));
  }
  // The daemon still answers.
  CHECK(HttpCall(port, "GET", "/health").status == 200);
}

TEST_CASE("http: keep-alive, pipelining and the idle timeout", "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port, {"--idle-timeout-s", "1"}));
  // Keep-alive: several requests on one connection.
  {
    HttpClient c(port);
    for (int i = 0; i < 3; ++i) {
      c.Send("GET /health HTTP/1.1\r\nhost: x\r\n\r\n");
      auto r = c.Read(10s);
      REQUIRE(r.has_value());
      CHECK(r->status == 200);
    }
    const std::string body = R"({"prompt":"Hello","max_tokens":2})";
    c.Send("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
    auto r = c.Read(30s);
    REQUIRE(r.has_value());
    CHECK(r->status == 200);
  }
  // Pipelined: three requests in one write, three answers in order.
  {
    HttpClient c(port);
    const std::string body = R"({"prompt":"Hello","max_tokens":2})";
    c.Send(
        "GET /health HTTP/1.1\r\nhost: x\r\n\r\n"
        "POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: " +
        std::to_string(body.size()) + "\r\n\r\n" + body +
        "GET /v1/nothing HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n");
    auto a = c.Read(30s);
    auto b = c.Read(30s);
    auto e = c.Read(30s);
    REQUIRE(a.has_value());
    REQUIRE(b.has_value());
    REQUIRE(e.has_value());
    CHECK(a->status == 200);
    CHECK(Body(*b)["object"] == "text_completion");
    CHECK(e->status == 404);
    CHECK(c.ClosedWithin(5s));  // connection: close
  }
  // HTTP/1.0 without keep-alive closes after its response; with it, the
  // response says so; a stream (no chunked bodies in 1.0) ends with the
  // connection.
  {
    HttpClient c(port);
    c.Send("GET /health HTTP/1.0\r\n\r\n");
    REQUIRE(c.Read(10s).has_value());
    CHECK(c.ClosedWithin(5s));
  }
  {
    HttpClient c(port);
    c.Send("GET /health HTTP/1.0\r\nconnection: keep-alive\r\n\r\n");
    auto r = c.Read(10s);
    REQUIRE(r.has_value());
    CHECK(r->headers["connection"] == "keep-alive");
    const std::string body = R"({"prompt":"Hello","max_tokens":3,"stream":true})";
    c.Send("POST /v1/completions HTTP/1.0\r\nconnection: keep-alive\r\ncontent-length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
    const std::string all = c.ReadToClose(30s);
    CHECK(all.find("transfer-encoding") == std::string::npos);
    CHECK(all.find("\r\n\r\ndata: {") != std::string::npos);
    CHECK(all.find("data: [DONE]\n\n") != std::string::npos);
  }
  // Slowloris: header bytes trickling in never complete a request; the idle
  // timeout (1 s) closes the connection all the same.
  {
    HttpClient c(port);
    const auto t0 = std::chrono::steady_clock::now();
    c.Send("GET /health HTTP/1.1\r\n");
    bool closed = false;
    for (int i = 0; i < 40 && !closed; ++i) {
      c.Send("x-slow-" + std::to_string(i) + ": 1\r\n");
      closed = c.ClosedWithin(100ms);
    }
    CHECK(closed);
    CHECK(std::chrono::steady_clock::now() - t0 < 3s);
  }
  // A silent connection too.
  {
    HttpClient c(port);
    CHECK(c.ClosedWithin(4s));
  }
}

TEST_CASE("http: a full queue is 429 with Retry-After, and a client gone cancels its job",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port, {"--max-queue", "1"}));
  // A long streamed generation over HTTP runs...
  const json long_run = {{"prompt", "Hello"}, {"max_tokens", 2000}, {"stream", true}};
  auto streaming = std::make_unique<HttpClient>(port);
  const std::string body = long_run.dump();
  streaming->Send("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: " +
                  std::to_string(body.size()) + "\r\n\r\n" + body);
  AwaitQueue(d.socket(), 1, 0);
  // ...one more waits on the socket (max_queue 1)...
  RawClient waiting(d.socket());
  SendGenerate(waiting, 2, {{"prompt", "Hello"}, {"max_tokens", 4}, {"mode", "raw"}});
  AwaitQueue(d.socket(), 1, 1);
  // ...so the next is refused: 429 with Retry-After.
  HttpResponse full =
      HttpCall(port, "POST", "/v1/completions", R"({"prompt":"Hello","max_tokens":4})");
  RequireError(full, 429);
  CHECK(Body(full)["error"]["code"] == "queue_full");
  REQUIRE(full.headers.count("retry-after") == 1);
  CHECK(std::stoi(full.headers["retry-after"]) >= 1);
  // The streaming client has its head and tokens; it hangs up: its job is
  // cancelled (long before its 2000 tokens) and the waiting one runs.
  auto head = streaming->Read(30s, /*head=*/true);
  REQUIRE(head.has_value());
  CHECK(head->status == 200);
  streaming.reset();
  Run after = Collect(waiting, 2);
  CHECK(after.final()["event"] == "done");
  AwaitQueue(d.socket(), 0, 0);
  CHECK(d.Log().find("client went away during its request") != std::string::npos);
  json metrics = Body(HttpCall(port, "GET", "/health"));
  CHECK(metrics["active_jobs"] == 0);
}

TEST_CASE("http: embeddings equal the socket's embed, as floats or base64", "[e2e][http]") {
  ModelRepo repo;
  AddTinyBert(repo);
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port, {"--embed-model", "tiny-bert"}));
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  auto reply = client->Call("embed", {{"input", json::array({"alpha beta", "gamma"})}}, 60s);
  REQUIRE(reply.ok());
  REQUIRE((*reply)["event"] == "result");
  const json expected = (*reply)["result"]["embeddings"];

  json out = Body(HttpCall(port, "POST", "/v1/embeddings",
                           R"({"input":["alpha beta","gamma"],"model":"tiny-bert"})"));
  CHECK(out["object"] == "list");
  CHECK(out["model"] == "tiny-bert");
  REQUIRE(out["data"].size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    CHECK(out["data"][i]["object"] == "embedding");
    CHECK(out["data"][i]["index"] == i);
    CHECK(out["data"][i]["embedding"] == expected[i]);
  }
  CHECK(out["usage"]["prompt_tokens"].get<int>() > 0);
  CHECK(out["usage"]["total_tokens"] == out["usage"]["prompt_tokens"]);

  // One text alone: compared with the socket's embed of it alone, since a
  // vector padded in a batch may differ from its solo one in the last bits.
  auto alone = client->Call("embed", {{"input", "gamma"}}, 60s);
  REQUIRE(alone.ok());
  REQUIRE((*alone)["event"] == "result");
  json one = Body(HttpCall(port, "POST", "/v1/embeddings", R"({"input":"gamma"})"));
  REQUIRE(one["data"].size() == 1);
  CHECK(one["data"][0]["embedding"] == (*alone)["result"]["embeddings"][0]);

  json b64 = Body(
      HttpCall(port, "POST", "/v1/embeddings", R"({"input":"gamma","encoding_format":"base64"})"));
  const std::string text = b64["data"][0]["embedding"];
  CHECK(text.size() == (expected[1].size() * 4 + 2) / 3 * 4);

  RequireError(HttpCall(port, "POST", "/v1/embeddings", R"({"input":[1,2]})"), 400, "input");
  RequireError(HttpCall(port, "POST", "/v1/embeddings", R"({"input":"a","dimensions":"x"})"), 400,
               "dimensions");
  RequireError(
      HttpCall(port, "POST", "/v1/embeddings", R"({"input":"a","encoding_format":"int8"})"), 400,
      "encoding_format");
}

TEST_CASE("http: another address needs an API keys file, and keys are Bearer tokens",
          "[e2e][http]") {
  ModelRepo repo;
  const int port = FreePort();
  // Off loopback without keys: refused at start.
  ProcessResult refused = RunProcess({MedqdPath().string(), "--config", "/dev/null", "--socket",
                                      (repo.dir() / "x.sock").string(), "--http-listen",
                                      "0.0.0.0:" + std::to_string(port)});
  CHECK(refused.status == 64);
  CHECK(refused.err.find("http_api_keys_file") != std::string::npos);

  const fs::path keys = repo.dir() / "keys";
  std::ofstream(keys) << "# keys\nsecret-one\n\nsecret-two\n";
  DaemonProcess d(HttpArgs(repo, port, {"--http-api-keys-file", keys.string()}));
  RequireError(HttpCall(port, "GET", "/v1/models"), 401);
  RequireError(HttpCall(port, "GET", "/v1/models", "", "authorization: Bearer nope\r\n"), 401);
  CHECK(HttpCall(port, "GET", "/v1/models", "", "authorization: Bearer secret-two\r\n").status ==
        200);
  CHECK(HttpCall(port, "GET", "/health").status == 200);  // health needs no key
  // SIGHUP reloads the keys.
  std::ofstream(keys) << "secret-three\n";
  d.Signal(SIGHUP);
  bool reloaded = false;
  for (int i = 0; i < 50 && !reloaded; ++i) {
    std::this_thread::sleep_for(100ms);
    reloaded =
        HttpCall(port, "GET", "/v1/models", "", "authorization: Bearer secret-three\r\n").status ==
        200;
  }
  CHECK(reloaded);
  RequireError(HttpCall(port, "GET", "/v1/models", "", "authorization: Bearer secret-one\r\n"),
               401);
}

TEST_CASE("http: the official openai Python client drives every route", "[e2e][http]") {
  ModelRepo repo;
  AddTinyBert(repo);
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port, {"--max-queue", "1"}));
  const auto r = RunClientScript(MEDQ_OPENAI_CLIENT_TEST,
                                 {"--base-url", "http://127.0.0.1:" + std::to_string(port) + "/v1",
                                  "--medq", MedqPath().string(), "--socket", d.socket()});
  if (!r) MEDQ_SKIP("the openai package is not installed; run scripts/setup-http-tests");
  RequireAllPassed(*r);
}

TEST_CASE("http: two daemons behind nginx, one full, its 429s retried on the other",
          "[e2e][http]") {
  if (!fs::exists("/usr/bin/python3")) MEDQ_SKIP("no /usr/bin/python3");
  ModelRepo repo;
  ProcessResult r = RunProcess({"/usr/bin/python3", MEDQ_PROXY_TEST, MedqdPath().string(),
                                repo.dir().string(), "tiny-llama"});
  INFO(r.out << r.err);
  if (r.status == 77) MEDQ_SKIP("nginx is not installed (apt-get install nginx-light)");
  CHECK(r.status == 0);
  CHECK(r.out.find("all passed") != std::string::npos);
}

TEST_CASE("http: systemd's socket named http turns the endpoint on", "[e2e][http]") {
  TempDir dir;
  const std::string path = (dir.path() / "activated.sock").string();
  int unix_fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::strncpy(un.sun_path, path.c_str(), sizeof(un.sun_path) - 1);
  REQUIRE(bind(unix_fd, reinterpret_cast<sockaddr*>(&un), sizeof(un)) == 0);
  REQUIRE(listen(unix_fd, 16) == 0);
  int tcp_fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in in{};
  in.sin_family = AF_INET;
  in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(tcp_fd, reinterpret_cast<sockaddr*>(&in), sizeof(in)) == 0);
  socklen_t len = sizeof(in);
  REQUIRE(getsockname(tcp_fd, reinterpret_cast<sockaddr*>(&in), &len) == 0);
  const int port = ntohs(in.sin_port);
  REQUIRE(listen(tcp_fd, 16) == 0);

  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(unix_fd, 3);
    dup2(tcp_fd, 4);
    setenv("LISTEN_FDS", "2", 1);
    setenv("LISTEN_FDNAMES", "medqd.socket:http", 1);
    setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
    execl(MedqdPath().c_str(), "medqd", "--config", "/dev/null", "--socket",
          (dir.path() / "unused.sock").c_str(), "--state-dir", (dir.path() / "state").c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  close(unix_fd);
  close(tcp_fd);
  bool ready = false;
  for (int i = 0; i < 200 && !ready; ++i) {
    std::this_thread::sleep_for(50ms);
    auto client = ipc::Client::Connect(path);
    ready = client.ok();
  }
  REQUIRE(ready);
  HttpResponse health;
  for (int i = 0; i < 100; ++i) {  // 503 until ready
    health = HttpCall(port, "GET", "/health");
    if (health.status == 200) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK(health.status == 200);
  CHECK(Body(health)["ready"] == true);
  CHECK_FALSE(fs::exists(dir.path() / "unused.sock"));
  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("http: on a Unix socket path, for a reverse proxy on the same host", "[e2e][http]") {
  ModelRepo repo;
  TempDir dir;
  const std::string path = (dir.path() / "http.sock").string();
  DaemonProcess d(DaemonArgs(repo, {"--http-listen", path}));
  REQUIRE(fs::is_socket(path));
  HttpClient c(path);
  c.Send("GET /health HTTP/1.1\r\nhost: x\r\n\r\n");
  auto health = c.Read(10s);
  REQUIRE(health.has_value());
  CHECK(health->status == 200);  // this test's user is the daemon's: allowed
  const std::string body = R"({"prompt":"Hello","max_tokens":2})";
  c.Send("POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body);
  auto done = c.Read(30s);
  REQUIRE(done.has_value());
  CHECK(Body(*done)["usage"]["completion_tokens"] == 2);
  c.Close();
  // The socket file goes with the daemon.
  d.Signal(SIGTERM);
  CHECK(d.Wait(30s) == 0);
  CHECK_FALSE(fs::exists(path));
}

}  // namespace medq::test
