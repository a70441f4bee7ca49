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
namespace fs = std::filesystem;

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

TEST_CASE("a model named NAME:int4 is loaded with int4 weights beside NAME as configured",
          "[e2e][quantize]") {
  ModelRepo repo;
  repo.AddModel("tiny-bert", fs::path(MEDQ_EMBEDDING_TEST_DATA) / "tiny-bert");
  DaemonProcess d(DaemonArgs(repo, {"--device", "cpu", "--max-loaded-models", "3"}));
  REQUIRE(RunMedq(d.socket(), {"load", "tiny-llama:int4"}).status == 0);
  const json ref = Reference("tiny-llama")["prompts"]["prompt1"];
  Run run =
      Generate(d.socket(),
               {{"model", "tiny-llama:int8"}, {"prompt_ids", ref["input_ids"]}, {"max_tokens", 4}});
  REQUIRE(run.final()["event"] == "done");
  REQUIRE(RunMedq(d.socket(), {"load", "tiny-llama"}).status == 0);
  const json int4 = LoadedEntry(d.socket(), "tiny-llama:int4");
  const json int8 = LoadedEntry(d.socket(), "tiny-llama:int8");
  const json none = LoadedEntry(d.socket(), "tiny-llama");
  REQUIRE(int4.is_object());
  REQUIRE(int8.is_object());
  REQUIRE(none.is_object());
  CHECK(int4["quantization"] == "int4");
  CHECK(int8["quantization"] == "int8");
  CHECK(none["quantization"] == "none");
  CHECK(int4["parameter_bytes"].get<int64_t>() < int8["parameter_bytes"].get<int64_t>());
  CHECK(int8["parameter_bytes"].get<int64_t>() < none["parameter_bytes"].get<int64_t>());
  // unload takes the name as loaded.
  CHECK(RunMedq(d.socket(), {"unload", "tiny-llama:int4"}).status == 0);
  CHECK(LoadedEntry(d.socket(), "tiny-llama")["quantization"] == "none");

  // A suffix that is not a quantization, and one on an embedding model, are
  // INVALID_REQUEST naming params.model.
  for (const std::string model : {"tiny-llama:fp8", "tiny-llama:"}) {
    CAPTURE(model);
    Run bad = Generate(d.socket(), {{"model", model}, {"prompt", "x"}});
    CHECK(bad.final()["event"] == "error");
    CHECK(bad.final()["code"] == "INVALID_REQUEST");
    CHECK_THAT(bad.final()["message"].get<std::string>(),
               Catch::Contains("params.model") && Catch::Contains("none, int8, int4"));
  }
  const json embed = CallOp(d.socket(), "embed", {{"model", "tiny-bert:int8"}, {"input", "x"}});
  CHECK(embed["code"] == "INVALID_REQUEST");
  CHECK_THAT(embed["message"].get<std::string>(),
             Catch::Contains("params.model") && Catch::Contains("embedding model"));
}

TEST_CASE("quantize_embeddings holds lm_head and the embeddings quantized too", "[e2e][quantize]") {
  ModelRepo repo;
  int64_t projections_only = 0;
  {
    DaemonProcess d(DaemonArgs(repo, {"--device", "cpu", "--quantize", "int4"}));
    REQUIRE(RunMedq(d.socket(), {"load", "tiny-llama"}).status == 0);
    projections_only = LoadedEntry(d.socket(), "tiny-llama")["parameter_bytes"].get<int64_t>();
  }
  DaemonProcess d(
      DaemonArgs(repo, {"--device", "cpu", "--quantize", "int4", "--quantize-embeddings", "true"}));
  const json ref = Reference("tiny-llama")["prompts"]["prompt1"];
  Run run = Generate(d.socket(), {{"model", "tiny-llama"},
                                  {"prompt_ids", ref["input_ids"]},
                                  {"max_tokens", 8},
                                  {"return_ids", true}});
  REQUIRE(run.final()["event"] == "done");
  CHECK(run.Ids().size() == 8);
  const json m = LoadedEntry(d.socket(), "tiny-llama");
  CHECK(m["quantization"] == "int4");
  CHECK(m["quantized_embeddings"] == true);
  // tiny-llama's untied 32000 x 64 embeddings and lm_head are most of it:
  // 8.2 MB in bf16, 2.6 MB in int4 (groups of 64).
  CHECK(m["parameter_bytes"].get<int64_t>() < projections_only - 5'000'000);
  // NAME:none is full precision whatever the daemon's quantize says.
  REQUIRE(RunMedq(d.socket(), {"load", "tiny-llama:none"}).status == 0);
  const json none = LoadedEntry(d.socket(), "tiny-llama:none");
  CHECK(none["quantization"] == "none");
  CHECK(none["quantized_embeddings"] == false);
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
