// Generation end to end: a real daemon with the fixture models, driven over
// the socket and through `medq generate`.
#include <signal.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/fixtures.h"
#include "tests/support/model_repo.h"

namespace medq::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Generates the adapter fixture's first reference prompt with the adapter and
// checks the greedy ids against transformers' (float32) when `exact`; a run
// that computes in bf16 (auto on a GPU) need only finish.
void RequireAdapterReference(const std::string& socket, bool exact = true) {
  json ref = Reference("tiny-llama-lora")["prompts"]["prompt1"];
  Run run = Generate(socket, {{"model", "tiny-llama"},
                              {"adapter", "tiny-llama-lora"},
                              {"prompt_ids", ref["input_ids"]},
                              {"max_tokens", 24},
                              {"return_ids", true}});
  REQUIRE(run.final()["event"] == "done");
  const std::vector<int32_t> expected = ref["greedy_ids"].get<std::vector<int32_t>>();
  const std::vector<int32_t> got = run.Ids();
  REQUIRE(!got.empty());
  REQUIRE(got.size() <= expected.size());
  const bool cpu = run.final()["device"] == "cpu";
  if (exact || cpu) CHECK(std::equal(got.begin(), got.end(), expected.begin()));
}

}  // namespace

TEST_CASE("greedy output through the daemon equals the reference", "[e2e][generate]") {
  ModelRepo repo;
  // The references compute in float32 from the bf16 weights
  // (fixtures/models/README.md); the CPU always does, a GPU under `auto`
  // computes in bf16, whose greedy ids follow them for a few steps only.
  DaemonProcess d(DaemonArgs(repo, {"--dtype", "fp32"}));
  for (const char* model : {"tiny-llama", "tiny-qwen2", "tiny-llama3"}) {
    json ref = Reference(model)["prompts"]["prompt1"];
    Run run = Generate(d.socket(), {{"model", model},
                                    {"prompt_ids", ref["input_ids"]},
                                    {"max_tokens", 24},
                                    {"return_ids", true}});
    CAPTURE(model, run.final().dump());
    REQUIRE(run.final()["event"] == "done");
    std::vector<int32_t> expected = ref["greedy_ids"].get<std::vector<int32_t>>();
    std::vector<int32_t> got = run.Ids();
    // The reference runs without an end-of-sequence stop; the daemon stops
    // there, so it matches a prefix ending in that token, or all 24.
    REQUIRE(!got.empty());
    REQUIRE(got.size() <= expected.size());
    CHECK(std::equal(got.begin(), got.end(), expected.begin()));
    CHECK(run.final()["usage"]["prompt_tokens"] == ref["input_ids"].size());
    CHECK(run.final()["usage"]["completion_tokens"] == got.size());
    CHECK(run.final()["finish_reason"] == (got.size() == 24 ? "length" : "stop"));
    // Each model's first request pays for its load, and the timings say so.
    CHECK(run.final()["timings"]["load_ms"].get<double>() > 1.0);
  }
}

TEST_CASE("the LoRA adapter's greedy output equals its reference", "[e2e][generate]") {
  ModelRepo repo;
  {
    // float32 compute, as the reference (see the greedy test above).
    DaemonProcess exact(DaemonArgs(repo, {"--dtype", "fp32"}));
    RequireAdapterReference(exact.socket());
  }
  DaemonProcess d(DaemonArgs(repo));
  RequireAdapterReference(d.socket(), /*exact=*/false);
  // The bf16 checkpoint stays bf16 on the CPU, but there an adapter merges
  // into float32 weights, where its deltas are not rounded away (the CPU
  // computes in float32 either way). On a GPU, auto keeps bf16.
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  auto h = client->Call("health");
  REQUIRE(h.ok());
  bool seen = false;
  for (const json& m : (*h)["result"]["loaded_models"]) {
    if (m["name"] != "tiny-llama+tiny-llama-lora") continue;
    seen = true;
    CHECK(m["dtype"] == (m["device"] == "cpu" ? "fp32" : "bf16"));
  }
  CHECK(seen);
}

TEST_CASE("text in, text out: streamed text equals non-streamed text for one seed",
          "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  for (const char* model : {"tiny-llama", "tiny-llama3", "tiny-qwen2"}) {
    CAPTURE(model);
    json params = {{"model", model},     {"prompt", "The patient was admitted with"},
                   {"mode", "raw"},      {"max_tokens", 40},
                   {"temperature", 0.8}, {"top_p", 0.95},
                   {"seed", 1234}};
    Run a = Generate(d.socket(), params);
    Run b = Generate(d.socket(), params);
    REQUIRE(a.final()["event"] == "done");
    CHECK(a.Text() == b.Text());
    CHECK(a.Count("token") >= 1);
    // The CLI prints the same text, streamed or not.
    const std::vector<std::string> args = {"generate",
                                           "--model",
                                           model,
                                           "--raw",
                                           "--max-tokens",
                                           "40",
                                           "--temperature",
                                           "0.8",
                                           "--top-p",
                                           "0.95",
                                           "--seed",
                                           "1234",
                                           "The patient was admitted with"};
    ProcessResult streamed = RunMedq(d.socket(), args);
    std::vector<std::string> args2 = args;
    args2.insert(args2.begin() + 1, "--no-stream");
    ProcessResult whole = RunMedq(d.socket(), args2);
    CHECK(streamed.status == 0);
    CHECK(streamed.out == whole.out);
    std::string expected = a.Text();
    if (expected.empty() || expected.back() != '\n') expected += "\n";
    CHECK(streamed.out == expected);
  }
}

TEST_CASE("the token ids through medq generate --ids match the text", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  ProcessResult r = RunMedq(d.socket(), {"generate", "--model", "tiny-llama3", "--raw", "--json",
                                         "--max-tokens", "12", "Hello"});
  REQUIRE(r.status == 0);
  json out = json::parse(r.out);
  CHECK(out["finish_reason"].is_string());
  CHECK(out["usage"]["prompt_tokens"] == 2);  // <|begin_of_text|> Hello
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  auto text = client->Call(
      "detokenize", {{"model", "tiny-llama3"}, {"ids", out["ids"]}, {"skip_special_tokens", true}});
  REQUIRE(text.ok());
  CHECK((*text)["result"]["text"] == out["text"]);
}

TEST_CASE("chat prompts go through the model's chat template", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  json messages = json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  auto rendered = client->Call("apply-template", {{"model", "tiny-qwen2"}, {"messages", messages}});
  REQUIRE(rendered.ok());
  const std::string prompt = (*rendered)["result"]["prompt"];
  CHECK(prompt ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n");
  // generate with the same messages sends exactly those ids.
  Run run =
      Generate(d.socket(), {{"model", "tiny-qwen2"}, {"messages", messages}, {"max_tokens", 1}});
  REQUIRE(run.final()["event"] == "done");
  CHECK(run.final()["usage"]["prompt_tokens"] == (*rendered)["result"]["ids"].size());
  // A prompt in auto mode is the same conversation without the system part.
  Run plain = Generate(
      d.socket(),
      {{"model", "tiny-qwen2"}, {"prompt", "Hi"}, {"system", "Be brief."}, {"max_tokens", 1}});
  CHECK(plain.final()["usage"]["prompt_tokens"] == (*rendered)["result"]["ids"].size());
}

TEST_CASE("a model without a chat template chats through the fallback template",
          "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  // tiny-llama's tokenizer (mistral_v1) has no template: ChatML, and the
  // tokenizer's own BOS (id 1) in front, as for a raw prompt.
  json messages = json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  auto rendered = client->Call("apply-template", {{"model", "tiny-llama"}, {"messages", messages}});
  REQUIRE(rendered.ok());
  CHECK((*rendered)["result"]["prompt"] ==
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\n");
  const json ids = (*rendered)["result"]["ids"];
  REQUIRE(!ids.empty());
  CHECK(ids[0] == 1);
  // messages, and a prompt in chat mode, send exactly those ids.
  Run chat =
      Generate(d.socket(), {{"model", "tiny-llama"}, {"messages", messages}, {"max_tokens", 4}});
  REQUIRE(chat.final()["event"] == "done");
  CHECK(chat.final()["usage"]["prompt_tokens"] == ids.size());
  Run mode_chat = Generate(d.socket(), {{"model", "tiny-llama"},
                                        {"prompt", "Hi"},
                                        {"system", "Be brief."},
                                        {"mode", "chat"},
                                        {"max_tokens", 4}});
  REQUIRE(mode_chat.final()["event"] == "done");
  CHECK(mode_chat.final()["usage"]["prompt_tokens"] == ids.size());
  // A prompt in auto mode is sent as it is.
  auto tokens = client->Call("tokenize", {{"model", "tiny-llama"}, {"text", "Hi"}});
  REQUIRE(tokens.ok());
  Run plain = Generate(d.socket(), {{"model", "tiny-llama"}, {"prompt", "Hi"}, {"max_tokens", 4}});
  REQUIRE(plain.final()["event"] == "done");
  CHECK(plain.final()["usage"]["prompt_tokens"] == (*tokens)["result"]["ids"].size());
  // health names the model; the daemon is not degraded by it.
  json health = (*client->Call("health"))["result"];
  CHECK(health["status"] == "ok");
  CHECK(health["loaded_models"][0]["has_chat_template"] == false);
  CHECK(health["warnings"] ==
        json::array({"model tiny-llama has no chat template; chat uses the fallback template "
                     "(ChatML)"}));
}

// transformers 5 saves a tokenizer's chat template as chat_template.jinja
// and leaves it out of tokenizer_config.json: such a folder chats as the one
// with the template in its config.
TEST_CASE("a chat template in chat_template.jinja is the model's template", "[e2e][generate]") {
  namespace fs = std::filesystem;
  ModelRepo repo;
  const fs::path folder = repo.dir() / "tiny-qwen2-jinja";
  fs::create_directories(folder);
  for (const char* name : {"config.json", "generation_config.json", "model.safetensors"})
    fs::create_symlink(ModelFixture("tiny-qwen2") / name, folder / name);
  fs::create_symlink(TokenizerFixture("qwen3") / "tokenizer.json", folder / "tokenizer.json");
  std::ifstream config_in(TokenizerFixture("qwen3") / "tokenizer_config.json");
  json config = json::parse(config_in);
  std::ofstream(folder / "chat_template.jinja") << config.at("chat_template").get<std::string>();
  config.erase("chat_template");
  std::ofstream(folder / "tokenizer_config.json") << config.dump();

  DaemonProcess d(DaemonArgs(repo));
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  const json messages = json::array(
      {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}});
  auto from_config =
      client->Call("apply-template", {{"model", "tiny-qwen2"}, {"messages", messages}});
  auto from_file =
      client->Call("apply-template", {{"model", "tiny-qwen2-jinja"}, {"messages", messages}});
  REQUIRE(from_config.ok());
  REQUIRE(from_file.ok());
  CHECK((*from_file)["result"]["prompt"] == (*from_config)["result"]["prompt"]);
  CHECK((*from_file)["result"]["ids"] == (*from_config)["result"]["ids"]);
  Run run = Generate(d.socket(),
                     {{"model", "tiny-qwen2-jinja"}, {"messages", messages}, {"max_tokens", 1}});
  REQUIRE(run.final()["event"] == "done");
  CHECK(run.final()["usage"]["prompt_tokens"] == (*from_config)["result"]["ids"].size());
}

TEST_CASE("invalid generate requests name the field", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  struct Case {
    json params;
    std::string code;
    std::string mentions;
  };
  const Case cases[] = {
      {{{"prompt", ""}}, "INVALID_REQUEST", "params.prompt"},
      {{{"max_tokens", 5}}, "INVALID_REQUEST", "params.prompt"},
      {{{"prompt", "x"}, {"max_tokens", 0}}, "INVALID_REQUEST", "params.max_tokens"},
      {{{"prompt", "x"}, {"max_tokens", 4000}}, "INVALID_REQUEST", "params.max_tokens"},
      {{{"prompt", std::string(30000, 'a') + " b"}, {"mode", "raw"}},
       "INVALID_REQUEST",
       "params.prompt"},
      {{{"prompt", "x"}, {"temprature", 0.5}}, "INVALID_REQUEST", "params.temprature"},
      {{{"prompt", "x"}, {"top_p", 0}}, "INVALID_REQUEST", "params.top_p"},
      {{{"prompt", "x"}, {"priority", "urgent"}}, "INVALID_REQUEST", "params.priority"},
      {{{"prompt_ids", {1, 99999999}}}, "INVALID_REQUEST", "params.prompt_ids"},
      {{{"prompt", "x"}, {"adapter", "tiny-llama-lora"}, {"model", "tiny-qwen2"}},
       "INVALID_REQUEST",
       ""},
      {{{"prompt", "x"}, {"model", "no-such-model"}}, "MODEL_NOT_FOUND", "tiny-llama"},
      {{{"prompt", "x"}, {"model", "../models/tiny-llama"}}, "MODEL_NOT_FOUND", ""},
      {{{"prompt", "x"}, {"model", ".."}}, "MODEL_NOT_FOUND", ""},
  };
  for (const Case& k : cases) {
    CAPTURE(k.params.dump());
    Run run = Generate(d.socket(), k.params);
    CHECK(run.final()["event"] == "error");
    CHECK(run.final()["code"] == k.code);
    CHECK_THAT(run.final()["message"].get<std::string>(), Catch::Contains(k.mentions));
  }
}

TEST_CASE("a model name cannot escape the models directory through a symlink", "[e2e][generate]") {
  ModelRepo repo;
  TempDir outside;
  std::filesystem::create_directory_symlink(ModelFixture("tiny-llama"), repo.dir() / "escape");
  DaemonProcess d(DaemonArgs(repo, {"--allow-model-paths", "false"}));
  Run run = Generate(d.socket(), {{"model", "escape"}, {"prompt_ids", {1, 2}}});
  CHECK(run.final()["code"] == "PERMISSION_DENIED");
  Run path = Generate(d.socket(),
                      {{"model", ModelFixture("tiny-llama").string()}, {"prompt_ids", {1, 2}}});
  CHECK(path.final()["code"] == "PERMISSION_DENIED");
}

TEST_CASE("five concurrent generates with max_queue 3", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--max-queue", "3"}));
  const json long_job = {
      {"model", "tiny-llama3"}, {"prompt_ids", {128000, 9906}}, {"max_tokens", 100000}};
  RawClient runner(d.socket());
  SendGenerate(runner, "run", long_job);
  AwaitQueue(d.socket(), 1, 0);

  std::vector<std::unique_ptr<RawClient>> waiters;
  const char* priorities[] = {"low", "normal", "high"};
  for (int i = 0; i < 3; ++i) {
    waiters.push_back(std::make_unique<RawClient>(d.socket()));
    json params = {{"model", "tiny-llama"},
                   {"prompt_ids", {1, 2, 3}},
                   {"max_tokens", 4},
                   {"priority", priorities[i]}};
    SendGenerate(*waiters.back(), i, params);
    AwaitQueue(d.socket(), 1, static_cast<size_t>(i + 1));
  }
  // The fifth is refused at once.
  RawClient fifth(d.socket());
  SendGenerate(fifth, "x", {{"prompt_ids", {1}}});
  Run refused = Collect(fifth, "x", 5s);
  CHECK(refused.final()["code"] == "QUEUE_FULL");
  CHECK(refused.final()["message"] == "Queue full (3/3). Try again later.");
  // The retry hint counts the tokens ahead: nearly 100,000 still to run
  // take far more than 20 s at any rate a fixture decodes (the hint's cap,
  // 300 s, on a CPU).
  INFO("retry_after_s " << refused.final()["retry_after_s"]);
  CHECK(refused.final()["retry_after_s"].get<double>() >= 20);

  // Positions: high first, then normal, then low.
  auto client = ipc::Client::Connect(d.socket());
  auto q = client->Call("queue");
  REQUIRE(q.ok());
  const json waiting = (*q)["result"]["waiting"];
  REQUIRE(waiting.size() == 3);
  CHECK(waiting[0]["priority"] == "high");
  CHECK(waiting[1]["priority"] == "normal");
  CHECK(waiting[2]["priority"] == "low");
  CHECK(waiting[2]["position"] == 3);

  // Stop the long job; the three run in priority order and all complete.
  json running = (*q)["result"]["running"][0];
  auto cancelled = client->Call("cancel", {{"job", running["job"]}});
  REQUIRE(cancelled.ok());
  CHECK((*cancelled)["result"]["state"] == "cancelling");
  Run first = Collect(runner, "run");
  CHECK(first.final()["finish_reason"] == "cancelled");

  std::vector<std::string> finish_order;
  std::vector<std::thread> readers;
  std::mutex mu;
  for (int i = 0; i < 3; ++i) {
    Run r = Collect(*waiters[static_cast<size_t>(i)], i);
    CHECK(r.final()["event"] == "done");
    // The last queued event each saw gives its final position before start.
    int last_position = 0;
    for (const json& e : r.events) {
      if (e["event"] == "queued") last_position = e["position"];
    }
    CHECK(last_position == 1);
    CHECK(r.Count("started") == 1);
  }
  auto totals = client->Call("queue");
  CHECK((*totals)["result"]["totals"]["rejected"] == 1);
  CHECK((*totals)["result"]["totals"]["cancelled"] == 1);
  CHECK((*totals)["result"]["totals"]["processed"].get<int>() >= 3);
}

TEST_CASE("priority order decides who runs next", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--max-queue", "5"}));
  RawClient runner(d.socket());
  SendGenerate(runner, "run",
               {{"model", "tiny-llama3"}, {"prompt_ids", {128000}}, {"max_tokens", 100000}});
  AwaitQueue(d.socket(), 1, 0);
  RawClient shared(d.socket());  // all three on one connection: replies tell the order
  SendGenerate(shared, "low", {{"prompt_ids", {1}}, {"max_tokens", 2}, {"priority", "low"}});
  SendGenerate(shared, "normal", {{"prompt_ids", {1}}, {"max_tokens", 2}});
  SendGenerate(shared, "high", {{"prompt_ids", {1}}, {"max_tokens", 2}, {"priority", "high"}});
  AwaitQueue(d.socket(), 1, 3);
  auto client = ipc::Client::Connect(d.socket());
  auto q = client->Call("queue");
  REQUIRE(client->Call("cancel", {{"job", (*q)["result"]["running"][0]["job"]}}).ok());
  std::vector<std::string> started;
  while (started.size() < 3) {
    auto e = shared.Read(30s);
    REQUIRE(e.has_value());
    if ((*e)["event"] == "started") started.push_back((*e)["id"]);
  }
  CHECK(started == std::vector<std::string>{"high", "normal", "low"});
}

TEST_CASE("a waiting job times out with QUEUE_TIMEOUT and leaves the queue", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  RawClient runner(d.socket());
  SendGenerate(runner, "run",
               {{"model", "tiny-llama3"}, {"prompt_ids", {128000}}, {"max_tokens", 100000}});
  AwaitQueue(d.socket(), 1, 0);
  RawClient waiter(d.socket());
  SendGenerate(waiter, "w", {{"prompt_ids", {1}}, {"queue_timeout_s", 0.5}});
  Run timed_out = Collect(waiter, "w", 10s);
  CHECK(timed_out.final()["code"] == "QUEUE_TIMEOUT");
  AwaitQueue(d.socket(), 1, 0);
  auto client = ipc::Client::Connect(d.socket());
  auto q = client->Call("queue");
  CHECK((*q)["result"]["totals"]["timed_out"] == 1);
  REQUIRE(client->Call("cancel", {{"job", (*q)["result"]["running"][0]["job"]}}).ok());
  CHECK(Collect(runner, "run").final()["finish_reason"] == "cancelled");
}

TEST_CASE("cancel while waiting, and a client killed mid-stream frees the lock",
          "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  auto runner = std::make_unique<RawClient>(d.socket());
  SendGenerate(*runner, "run",
               {{"model", "tiny-llama3"}, {"prompt_ids", {128000}}, {"max_tokens", 100000}});
  AwaitQueue(d.socket(), 1, 0);
  REQUIRE(runner->Read(10s).has_value());  // streaming has begun

  RawClient waiter(d.socket());
  SendGenerate(waiter, "w", {{"prompt_ids", {1}}, {"max_tokens", 2}});
  AwaitQueue(d.socket(), 1, 1);
  auto client = ipc::Client::Connect(d.socket());
  auto q = client->Call("queue");
  const json waiting_job = (*q)["result"]["waiting"][0]["job"];
  auto cancelled = client->Call("cancel", {{"job", waiting_job}});
  REQUIRE(cancelled.ok());
  CHECK((*cancelled)["result"]["state"] == "cancelled");
  CHECK(Collect(waiter, "w").final()["code"] == "CANCELLED");

  // Another waits; the streaming client vanishes: the next job runs.
  RawClient next(d.socket());
  SendGenerate(next, "n", {{"prompt_ids", {1}}, {"max_tokens", 2}});
  AwaitQueue(d.socket(), 1, 1);
  runner.reset();  // the client is killed: its connection closes mid-stream
  Run done = Collect(next, "n", 30s);
  CHECK(done.final()["event"] == "done");
  auto after = client->Call("queue");
  CHECK((*after)["result"]["totals"]["cancelled"].get<int>() == 2);
}

TEST_CASE("health and queue answer quickly while a long generation runs", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  RawClient runner(d.socket());
  SendGenerate(runner, "run",
               {{"model", "tiny-llama3"}, {"prompt_ids", {128000}}, {"max_tokens", 100000}});
  for (;;) {  // wait until tokens flow: the model is loaded and decoding
    auto e = runner.Read(30s);
    REQUIRE(e.has_value());
    if ((*e)["event"] == "token") break;
  }
  auto client = ipc::Client::Connect(d.socket());
  std::vector<double> ms;
  for (int i = 0; i < 20; ++i) {
    for (const char* op : {"health", "queue"}) {
      const auto t0 = std::chrono::steady_clock::now();
      auto r = client->Call(op, {}, 5s);
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      REQUIRE(r.ok());
    }
  }
  std::sort(ms.begin(), ms.end());
  CHECK(ms[ms.size() / 2] < 50);  // median: robust to a stray scheduling hiccup
  auto h = client->Call("health");
  CHECK((*h)["result"]["active_jobs"] == 1);
  CHECK((*h)["result"]["loaded_models"].size() == 1);
  auto q = client->Call("queue");
  REQUIRE(client->Call("cancel", {{"job", (*q)["result"]["running"][0]["job"]}}).ok());
  CHECK(Collect(runner, "run").final()["finish_reason"] == "cancelled");
}

TEST_CASE("stop strings end the output before them", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  json params = {
      {"model", "tiny-llama3"}, {"prompt", "Hello"}, {"mode", "raw"}, {"max_tokens", 30}};
  Run full = Generate(d.socket(), params);
  const std::string text = full.Text();
  REQUIRE(text.size() > 6);
  // Three bytes from the middle, widened to whole UTF-8 characters (a stop
  // string is text: it must be valid UTF-8 to be sent at all).
  const auto continuation = [&](size_t i) {
    return i < text.size() && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80;
  };
  size_t begin = text.size() / 2, end = begin + 3;
  while (begin > 0 && continuation(begin))
    --begin;
  while (continuation(end))
    ++end;
  const std::string stop = text.substr(begin, end - begin);
  params["stop"] = {stop};
  Run stopped = Generate(d.socket(), params);
  CHECK(stopped.final()["finish_reason"] == "stop");
  CHECK(stopped.Text() == text.substr(0, text.find(stop)));
}

}  // namespace medq::test

namespace medq::test {

TEST_CASE("an out-of-memory while loading falls back to the CPU and the request succeeds",
          "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--test-fault-injection"}));
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  auto armed = client->Call("inject-fault", {{"at", "load"}});
  REQUIRE(armed.ok());
  REQUIRE((*armed)["event"] == "result");
  Run run = Generate(d.socket(), {{"prompt_ids", {1, 2, 3}}, {"max_tokens", 3}});
  CHECK(run.final()["event"] == "done");
  auto h = client->Call("health");
  REQUIRE(h.ok());
  CHECK((*h)["result"]["status"] == "degraded");
  CHECK_THAT((*h)["result"]["warnings"].dump(), Catch::Contains("ran out of memory"));
  CHECK((*h)["result"]["loaded_models"][0]["fell_back_to_cpu"] == true);
  CHECK_THAT(d.Log(), Catch::Contains("loading it on the CPU instead"));
}

TEST_CASE("without fallback an out-of-memory while loading or merging is GPU_OOM",
          "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--test-fault-injection", "--gpu-fallback", "none"}));
  auto client = ipc::Client::Connect(d.socket());
  const json plain = {{"prompt_ids", {1, 2, 3}}, {"max_tokens", 3}};
  json adapted = plain;
  adapted["model"] = "tiny-llama";
  adapted["adapter"] = "tiny-llama-lora";
  for (const auto& [at, params] : {std::pair{"load", plain}, std::pair{"merge", adapted}}) {
    CAPTURE(at);
    REQUIRE(client->Call("inject-fault", {{"at", at}}).ok());
    Run failed = Generate(d.socket(), params);
    CHECK(failed.final()["code"] == "GPU_OOM");
    CHECK(failed.final().contains("retry_after_s"));
    Run next = Generate(d.socket(), params);
    CHECK(next.final()["event"] == "done");
  }
}

TEST_CASE("an out-of-memory in a decode step fails that job only", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--test-fault-injection"}));
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client->Call("inject-fault", {{"at", "decode"}}).ok());
  Run failed = Generate(d.socket(), {{"prompt_ids", {1, 2, 3}}, {"max_tokens", 8}});
  CHECK(failed.final()["code"] == "GPU_OOM");
  CHECK(failed.Count("token") >= 1);  // it failed mid-stream, after the first token
  Run next = Generate(d.socket(), {{"prompt_ids", {1, 2, 3}}, {"max_tokens", 8}});
  CHECK(next.final()["event"] == "done");
  auto q = client->Call("queue");
  CHECK((*q)["result"]["running"].empty());
}

TEST_CASE("an out-of-memory while merging a LoRA adapter falls back like a load",
          "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--test-fault-injection"}));
  auto client = ipc::Client::Connect(d.socket());
  REQUIRE(client.ok());
  REQUIRE(client->Call("inject-fault", {{"at", "merge"}}).ok());
  // The adapted model still gives its reference, from the CPU copy.
  RequireAdapterReference(d.socket());
  auto h = client->Call("health");
  REQUIRE(h.ok());
  CHECK((*h)["result"]["loaded_models"][0]["fell_back_to_cpu"] == true);
  CHECK_THAT(d.Log(), Catch::Contains("merging adapter tiny-llama-lora"));
}

TEST_CASE("fault injection is refused unless the daemon was started for it", "[e2e][generate]") {
  DaemonProcess d;
  auto client = ipc::Client::Connect(d.socket());
  auto r = client->Call("inject-fault", {{"at", "load"}});
  REQUIRE(r.ok());
  CHECK((*r)["code"] == "PERMISSION_DENIED");
}

}  // namespace medq::test

namespace medq::test {

TEST_CASE("metrics count requests, tokens and queue waits", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  Run run = Generate(d.socket(), {{"prompt_ids", {1, 2, 3}}, {"max_tokens", 5}});
  REQUIRE(run.final()["event"] == "done");
  Generate(d.socket(), {{"prompt", "x"}, {"model", "missing"}});
  ProcessResult r = RunMedq(d.socket(), {"metrics"});
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("medq_requests_total{op=\"generate\",outcome=\"ok\"} 1"));
  CHECK_THAT(r.out,
             Catch::Contains("medq_requests_total{op=\"generate\",outcome=\"MODEL_NOT_FOUND\"} 1"));
  const int tokens = run.final()["usage"]["completion_tokens"];
  CHECK_THAT(r.out, Catch::Contains("medq_tokens_generated_total " + std::to_string(tokens)));
  CHECK_THAT(r.out, Catch::Contains("medq_queue_wait_seconds_count 1"));
  CHECK_THAT(r.out, Catch::Contains("medq_time_to_first_token_seconds_count 1"));
  CHECK_THAT(r.out, Catch::Contains("medq_model_load_seconds_count 1"));
  CHECK_THAT(r.out, Catch::Contains("medq_memory_cleanups_total 1"));
  CHECK_THAT(r.out, Catch::Contains("medq_ready 1"));
  // No prompt text ever appears.
  CHECK(r.out.find("\"x\"") == std::string::npos);
}

}  // namespace medq::test

namespace medq::test {

TEST_CASE("a preloaded model is loaded and warmed up before the daemon is ready",
          "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--preload", "tiny-llama3"}));
  auto client = ipc::Client::Connect(d.socket());
  json health;
  for (int i = 0; i < 500; ++i) {
    health = (*client->Call("health"))["result"];
    if (health["ready"] == true) break;
    std::this_thread::sleep_for(20ms);
  }
  REQUIRE(health["ready"] == true);
  REQUIRE(health["loaded_models"].size() == 1);
  CHECK(health["loaded_models"][0]["name"] == "tiny-llama3");
  // auto: the GPU when there is one; the checkpoint's bf16 either way (on the
  // CPU the kernels compute in fp32).
  CHECK(health["loaded_models"][0]["device"] ==
        (health["cuda_available"] == true ? "cuda:0" : "cpu"));
  CHECK(health["loaded_models"][0]["dtype"] == "bf16");
  CHECK(health["loaded_models"][0]["has_chat_template"] == true);
}

TEST_CASE("a preload that fails leaves the daemon not ready, with the reason", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo, {"--preload", "no-such-model"}), std::chrono::seconds(30),
                  /*wait_until_ready=*/false);
  // The preload fails as soon as the name does not resolve; under
  // ThreadSanitizer on a loaded machine that takes longer than a fixed pause.
  ProcessResult r = RunMedq(d.socket(), {"health"});
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (r.out.find("preload failed") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    r = RunMedq(d.socket(), {"health"});
  }
  CHECK(r.status == 75);
  CHECK_THAT(r.out, Catch::Contains("preload failed") && Catch::Contains("no-such-model"));
}

TEST_CASE("models, load and unload manage what is in memory", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  ProcessResult listed = RunMedq(d.socket(), {"--json", "models"});
  REQUIRE(listed.status == 0);
  json models = json::parse(listed.out);
  // The models directory's folders and the built-in demo model.
  CHECK(models["available"] ==
        json::array({"medq-demo", "tiny-llama", "tiny-llama-lora", "tiny-llama3", "tiny-qwen2"}));
  CHECK_THAT(models["builtin_models_dir"].get<std::string>(), Catch::EndsWith("share/medq/models"));
  CHECK(models["loaded"].empty());
  CHECK(RunMedq(d.socket(), {"load", "tiny-qwen2"}).status == 0);
  // max_loaded_models is 1: loading another replaces it.
  CHECK(RunMedq(d.socket(), {"load", "tiny-llama"}).status == 0);
  models = json::parse(RunMedq(d.socket(), {"--json", "models"}).out);
  REQUIRE(models["loaded"].size() == 1);
  CHECK(models["loaded"][0]["name"] == "tiny-llama");
  CHECK(RunMedq(d.socket(), {"unload", "tiny-llama"}).status == 0);
  CHECK(RunMedq(d.socket(), {"unload", "tiny-llama"}).status == 65);  // MODEL_NOT_FOUND
  models = json::parse(RunMedq(d.socket(), {"--json", "models"}).out);
  CHECK(models["loaded"].empty());
}

TEST_CASE("tokenize and template show what the model receives", "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  ProcessResult tok =
      RunMedq(d.socket(), {"--json", "tokenize", "--model", "tiny-llama3", "Hello"});
  REQUIRE(tok.status == 0);
  json t = json::parse(tok.out);
  CHECK(t["ids"] == json::array({128000, 9906}));
  CHECK(t["tokens"] == json::array({"<|begin_of_text|>", "Hello"}));
  ProcessResult no_special = RunMedq(
      d.socket(), {"--json", "tokenize", "--model", "tiny-llama3", "--no-special", "Hello"});
  CHECK(json::parse(no_special.out)["ids"] == json::array({9906}));

  TempDir dir;
  std::ofstream(dir.path() / "m.json") << R"([{"role":"user","content":"Hi"}])";
  ProcessResult tmpl =
      RunMedq(d.socket(), {"template", "--model", "tiny-qwen2", (dir.path() / "m.json").string()});
  REQUIRE(tmpl.status == 0);
  CHECK(tmpl.out == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  ProcessResult bare =
      RunMedq(d.socket(), {"template", "--model", "tiny-qwen2", "--no-generation-prompt",
                           (dir.path() / "m.json").string()});
  CHECK(bare.out == "<|im_start|>user\nHi<|im_end|>\n");
}

// transformers' `tojson` keeps a dict's keys in their order; so must every
// step from the client's bytes to the template (the envelope, params, the
// job), or tool definitions reach the model alphabetised.
TEST_CASE("tools and template kwargs reach the chat template in the client's key order",
          "[e2e][generate]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  // Written by hand: a JSON library would sort these keys.
  const std::string tool =
      R"({"type":"function","function":{"name":"get_weather","description":"Weather in a city",)"
      R"("parameters":{"type":"object","required":["city"],"properties":{"city":{"type":"string"}}}}})";
  RawClient c(d.socket());
  const json reply =
      c.Roundtrip(R"({"v":1,"id":1,"op":"apply-template","params":{"model":"tiny-qwen2",)"
                  R"("messages":[{"role":"user","content":"Hi"}],"tools":[)" +
                  tool + "]}}\n");
  CAPTURE(reply.dump());
  REQUIRE(reply["event"] == "result");
  const std::string prompt = reply["result"]["prompt"];
  CHECK_THAT(prompt,
             Catch::Contains(
                 R"({"type": "function", "function": {"name": "get_weather", "description": )"
                 R"("Weather in a city", "parameters": {"type": "object", "required": ["city"], )"
                 R"("properties": {"city": {"type": "string"}}}}})"));
  // generate renders the same prompt: its prompt token count equals the ids
  // apply-template gives.
  REQUIRE(c.Send(R"({"v":1,"id":3,"op":"generate","params":{"model":"tiny-qwen2",)"
                 R"("max_tokens":1,"messages":[{"role":"user","content":"Hi"}],"tools":[)" +
                 tool + "]}}\n"));
  const json generated = Collect(c, 3).final();
  REQUIRE(generated["event"] == "done");
  CHECK(generated["usage"]["prompt_tokens"] == reply["result"]["ids"].size());
}

}  // namespace medq::test
