// Structured output end to end: response_format and forced tool calls over
// HTTP (the official openai client, plain and streamed; LangChain and
// LiteLLM) and over the socket, alone and batched,
// every answer checked by the reference validator (tests/http/
// structured_output_test.py, Python's jsonschema), on models with a
// byte-level vocabulary (tiny-qwen2, the built-in medq-demo) and a
// SentencePiece one with byte fallback (tiny-llama). Also the socket's and
// the CLI's refusals.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/e2e/generate_client.h"
#include "tests/e2e/http_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"
#include "tests/support/sanitizers.h"
#include "tests/support/skip.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace medq::test {

TEST_CASE("structured: every answer valid under its schema, alone and batched",
          "[e2e][structured]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port, {"--max-concurrent", "4", "--max-queue", "64"}));
  std::vector<std::string> args = {"--base-url", "http://127.0.0.1:" + std::to_string(port) + "/v1",
                                   "--socket",   d.socket(),
                                   "--models",   "tiny-qwen2,tiny-llama,medq-demo"};
  if (kSanitized) args.push_back("--quick");
  const auto r = RunClientScript(MEDQ_STRUCTURED_OUTPUT_TEST, args);
  if (!r) MEDQ_SKIP("openai or jsonschema is not installed; run scripts/setup-http-tests");
  RequireAllPassed(*r);
}

TEST_CASE("structured: LangChain and LiteLLM get structured output and tool calls",
          "[e2e][structured]") {
  ModelRepo repo;
  const int port = FreePort();
  DaemonProcess d(HttpArgs(repo, port));
  const auto r = RunClientScript(
      MEDQ_CLIENTS_TEST,
      {"--base-url", "http://127.0.0.1:" + std::to_string(port) + "/v1", "--model", "tiny-qwen2"});
  if (!r) MEDQ_SKIP("langchain-openai or litellm is not installed; run scripts/setup-http-tests");
  RequireAllPassed(*r);
}

TEST_CASE("structured: the socket refuses what it cannot enforce, naming it", "[e2e][structured]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  json params = {{"model", "tiny-qwen2"},
                 {"prompt", "x"},
                 {"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"schema", {{"type", "array"}, {"uniqueItems", true}}}}}}}};
  json reply = CallOp(d.socket(), "generate", params);
  CHECK(reply.value("code", "") == "INVALID_REQUEST");
  CHECK(reply.value("message", "").find("\"uniqueItems\"") != std::string::npos);

  // A pattern the grammar engine cannot read is refused by the worker.
  params["response_format"]["json_schema"]["schema"] = {{"type", "string"},
                                                        {"pattern", "(unclosed"}};
  reply = CallOp(d.socket(), "generate", params);
  CHECK(reply.value("code", "") == "INVALID_REQUEST");
  CHECK(reply.value("message", "").find("params.response_format") != std::string::npos);

  // The same schema twice: both answered, the second from the cache.
  params["response_format"] = {
      {"type", "json_schema"},
      {"json_schema", {{"schema", {{"enum", json::array({"red", "green"})}}}}}};
  for (int i = 0; i < 2; ++i) {
    const Run run = Generate(d.socket(), params);
    CHECK(run.final().value("event", "") == "done");
    const std::string text = run.Text();
    CHECK((text == "\"red\"" || text == "\"green\""));
  }
}

TEST_CASE("structured: medq generate --json-schema and --json-object", "[e2e][structured]") {
  ModelRepo repo;
  DaemonProcess d(DaemonArgs(repo));
  const fs::path schema = repo.dir() / "schema.json";
  std::ofstream(schema) << R"({"type": "object", "properties": {"ok": {"type": "boolean"}},
                              "required": ["ok"], "additionalProperties": false})";
  ProcessResult r = RunMedq(d.socket(), {"generate", "--model", "tiny-qwen2", "--no-stream",
                                         "--json-schema", schema.string(), "note"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  const json doc = json::parse(r.out);
  CHECK(doc.size() == 1);
  CHECK(doc.at("ok").is_boolean());

  std::ofstream(schema) << R"({"type": "object", "oneOf": []})";
  r = RunMedq(d.socket(),
              {"generate", "--model", "tiny-qwen2", "--json-schema", schema.string(), "note"});
  CHECK(r.status != 0);
  CHECK(r.err.find("\"oneOf\"") != std::string::npos);

  r = RunMedq(d.socket(), {"generate", "--model", "tiny-qwen2", "--json-schema",
                           (repo.dir() / "missing.json").string(), "note"});
  CHECK(r.status != 0);
  CHECK(r.err.find("missing.json") != std::string::npos);

  r = RunMedq(d.socket(),
              {"generate", "--model", "tiny-qwen2", "--max-tokens", "8", "--json-object", "note"});
  INFO(r.out << r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.rfind("{", 0) == 0);
}

}  // namespace medq::test
