// quantize = int8 and int4 end to end: a daemon whose generation models hold
// quantized projections (CPU), what `models` and `health` say of them, a generation
// with and without a LoRA adapter, and the refusals of what it cannot run.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/fixtures.h"
#include "tests/support/model_repo.h"

namespace medq::test {
namespace {

using nlohmann::json;

// `models`' entry for the loaded model `name`, or null.
json LoadedEntry(const std::string& socket, const std::string& name) {
  const ProcessResult listed = RunMedq(socket, {"--json", "models"});
  REQUIRE(listed.status == 0);
  INFO(listed.out);
  const json models = json::parse(listed.out);
  for (const json& m : models["loaded"]) {
    if (m["name"] == name) return m;
  }
  FAIL_CHECK("no loaded model " << name);
  return nullptr;
}

// A daemon with `quantize` = q loads, lists, generates and adapts.
void CheckQuantizedDaemon(const std::string& q) {
  ModelRepo repo;
  int64_t full_bytes = 0;
  {
    DaemonProcess d(DaemonArgs(repo, {"--device", "cpu"}));
    REQUIRE(RunMedq(d.socket(), {"load", "tiny-llama"}).status == 0);
    const json m = LoadedEntry(d.socket(), "tiny-llama");
    REQUIRE(m.is_object());
    CHECK(m["quantization"] == "none");
    full_bytes = m["parameter_bytes"].get<int64_t>();
  }
  DaemonProcess d(DaemonArgs(repo, {"--device", "cpu", "--quantize", q}));
  REQUIRE(RunMedq(d.socket(), {"load", "tiny-llama"}).status == 0);
  const json m = LoadedEntry(d.socket(), "tiny-llama");
  REQUIRE(m.is_object());
  CHECK(m["quantization"] == q);
  CHECK(m["dtype"] == "bf16");  // the embeddings and lm_head
  // The projections shrink to about half (int8) or a quarter (int4); the
  // embeddings and lm_head (most of this tiny model) do not.
  CHECK(m["parameter_bytes"].get<int64_t>() < full_bytes);
  CHECK_THAT(RunMedq(d.socket(), {"models"}).out, Catch::Contains("bf16 + " + q + " on cpu"));
  CHECK_THAT(RunMedq(d.socket(), {"health"}).out, Catch::Contains("bf16 + " + q + " on cpu"));

  const json ref = Reference("tiny-llama")["prompts"]["prompt1"];
  Run run = Generate(d.socket(), {{"model", "tiny-llama"},
                                  {"prompt_ids", ref["input_ids"]},
                                  {"max_tokens", 8},
                                  {"return_ids", true}});
  REQUIRE(run.final()["event"] == "done");
  CHECK_FALSE(run.Ids().empty());

  // An adapter merges into full-precision weights; the merged model is
  // quantized.
  Run adapted = Generate(d.socket(), {{"model", "tiny-llama"},
                                      {"adapter", "tiny-llama-lora"},
                                      {"prompt_ids", ref["input_ids"]},
                                      {"max_tokens", 8}});
  REQUIRE(adapted.final()["event"] == "done");
  const json a = LoadedEntry(d.socket(), "tiny-llama+tiny-llama-lora");
  REQUIRE(a.is_object());
  CHECK(a["quantization"] == q);
}

}  // namespace

TEST_CASE("an int8 daemon loads quantized models, says so, and generates", "[e2e][quantize]") {
  CheckQuantizedDaemon("int8");
}

TEST_CASE("an int4 daemon loads quantized models, says so, and generates", "[e2e][quantize]") {
  CheckQuantizedDaemon("int4");
}

TEST_CASE("quantize other than none, int8 and int4 is refused at start", "[e2e][quantize]") {
  ModelRepo repo;
  std::vector<std::string> argv = {MedqdPath().string()};
  for (const std::string& a : DaemonArgs(repo, {"--quantize", "int3", "--print-config"}))
    argv.push_back(a);
  const ProcessResult r = RunProcess(argv);
  CHECK(r.status == 64);
  CHECK_THAT(r.out + r.err, Catch::Contains("none, int8, int4"));
}

}  // namespace medq::test
