// config.json parsing: the fixtures' values, and missing or absurd values
// refused with the key named.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "daemon/engine/model_config.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

nlohmann::json FixtureConfig(const char* name) {
  auto j = ReadJsonFile(medq::test::ModelFixture(name) / "config.json");
  REQUIRE(j.ok());
  return *j;
}

std::string ParseError(const nlohmann::json& j) {
  auto r = ParseModelConfig(j, nullptr, "config.json");
  REQUIRE_FALSE(r.ok());
  CHECK(r.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(r.error().message, Catch::Contains("config.json"));
  return r.error().message;
}

TEST_CASE("fixture configs parse to the documented shapes", "[engine][config]") {
  auto llama = LoadModelConfig(medq::test::ModelFixture("tiny-llama"));
  REQUIRE(llama.ok());
  CHECK(llama->architecture == "LlamaForCausalLM");
  CHECK(llama->head_dim == 16);
  CHECK(llama->num_kv_heads == 2);
  CHECK_FALSE(llama->tie_word_embeddings);
  CHECK(llama->eos_ids == std::vector<int32_t>{2});
  auto qwen = LoadModelConfig(medq::test::ModelFixture("tiny-qwen2"));
  REQUIRE(qwen.ok());
  CHECK(qwen->qkv_bias);
  CHECK_FALSE(qwen->o_bias);
  CHECK(qwen->tie_word_embeddings);
  auto l3 = LoadModelConfig(medq::test::ModelFixture("tiny-llama3"));
  REQUIRE(l3.ok());
  CHECK(l3->rope_scaling.type == RopeScalingType::kLlama3);
  CHECK(l3->rope_scaling.factor == 8.0);
  CHECK(l3->num_kv_heads == 1);
}

TEST_CASE("head_dim, eos lists and generation_config override", "[engine][config]") {
  auto j = FixtureConfig("tiny-llama");
  j["head_dim"] = 32;
  j["architectures"] = {"Qwen3ForCausalLM"};
  auto gen = nlohmann::json{{"eos_token_id", {5, 6}}};
  auto r = ParseModelConfig(j, &gen, "config.json");
  REQUIRE(r.ok());
  CHECK(r->head_dim == 32);
  CHECK(r->qk_norm);
  CHECK(r->eos_ids == std::vector<int32_t>{5, 6});
  j["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  r = ParseModelConfig(j, nullptr, "config.json");
  REQUIRE(r.ok());
  CHECK(r->rope_scaling.type == RopeScalingType::kLinear);
}

// transformers 5 writes rope_theta and the scaling into rope_parameters, and
// torch_dtype as dtype.
TEST_CASE("transformers 5 configs: rope_parameters and dtype", "[engine][config]") {
  auto legacy = FixtureConfig("tiny-llama3");
  auto j = legacy;
  nlohmann::json params = j["rope_scaling"];
  params["rope_theta"] = j["rope_theta"];
  j.erase("rope_scaling");
  j.erase("rope_theta");
  j["rope_parameters"] = params;
  j["dtype"] = j["torch_dtype"];
  j.erase("torch_dtype");
  auto old_way = ParseModelConfig(legacy, nullptr, "config.json");
  auto new_way = ParseModelConfig(j, nullptr, "config.json");
  REQUIRE(old_way.ok());
  REQUIRE(new_way.ok());
  CHECK(new_way->rope_theta == old_way->rope_theta);
  CHECK(new_way->rope_theta == 500000.0);
  CHECK(new_way->rope_scaling.type == RopeScalingType::kLlama3);
  CHECK(new_way->rope_scaling.factor == old_way->rope_scaling.factor);
  CHECK(new_way->rope_scaling.low_freq_factor == old_way->rope_scaling.low_freq_factor);
  CHECK(new_way->rope_scaling.high_freq_factor == old_way->rope_scaling.high_freq_factor);
  CHECK(new_way->rope_scaling.original_max_position_embeddings ==
        old_way->rope_scaling.original_max_position_embeddings);
  CHECK(new_way->torch_dtype == "bfloat16");

  SECTION("rope_parameters is read alone, as transformers 5 reads it") {
    j["rope_theta"] = 10.0;
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e6}};
    auto r = ParseModelConfig(j, nullptr, "config.json");
    REQUIRE(r.ok());
    CHECK(r->rope_theta == 1e6);
    CHECK(r->rope_scaling.type == RopeScalingType::kNone);
    j["rope_parameters"] = {{"rope_theta", 2e6}};  // no rope_type: "default"
    r = ParseModelConfig(j, nullptr, "config.json");
    REQUIRE(r.ok());
    CHECK(r->rope_theta == 2e6);
    CHECK(r->rope_scaling.type == RopeScalingType::kNone);
  }
  SECTION("bad values inside rope_parameters name the key") {
    j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", -1}};
    auto r = ParseModelConfig(j, nullptr, "config.json");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("rope_parameters: 'rope_theta'"));
    j["rope_parameters"] = {{"rope_type", "yarn"}, {"rope_theta", 1e4}, {"factor", 4}};
    r = ParseModelConfig(j, nullptr, "config.json");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("'rope_parameters' has type 'yarn'"));
    j["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}}};
    r = ParseModelConfig(j, nullptr, "config.json");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("one object per attention type"));
    j["rope_parameters"] = 3;
    r = ParseModelConfig(j, nullptr, "config.json");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.error().message, Catch::Contains("'rope_parameters' is not an object"));
  }
}

TEST_CASE("missing or absurd config values are refused naming the key",
          "[engine][config][corrupt]") {
  auto j = FixtureConfig("tiny-llama");
  SECTION("missing hidden_size") {
    j.erase("hidden_size");
    CHECK_THAT(ParseError(j), Catch::Contains("'hidden_size' is missing"));
  }
  SECTION("zero heads") {
    j["num_attention_heads"] = 0;
    CHECK_THAT(ParseError(j), Catch::Contains("'num_attention_heads'"));
  }
  SECTION("hidden size not divisible by heads") {
    j["num_attention_heads"] = 3;
    j["num_key_value_heads"] = 3;
    CHECK_THAT(ParseError(j), Catch::Contains("not divisible by num_attention_heads"));
  }
  SECTION("kv heads not dividing heads") {
    j["num_key_value_heads"] = 3;
    CHECK_THAT(ParseError(j), Catch::Contains("'num_key_value_heads'"));
  }
  SECTION("absurd sizes and types") {
    j["vocab_size"] = int64_t{1} << 40;
    CHECK_THAT(ParseError(j), Catch::Contains("'vocab_size'"));
    j["vocab_size"] = "many";
    CHECK_THAT(ParseError(j), Catch::Contains("'vocab_size' is not an integer"));
  }
  SECTION("bad eps and rope") {
    j["rms_norm_eps"] = -1;
    CHECK_THAT(ParseError(j), Catch::Contains("'rms_norm_eps'"));
    j["rms_norm_eps"] = 1e-5;
    j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}};
    CHECK_THAT(ParseError(j), Catch::Contains("yarn"));
  }
  SECTION("bad values inside rope_scaling name the file and the key") {
    // Found by tests/fuzz/model_config_fuzz: these messages were built from a
    // destroyed string.
    j["rope_scaling"] = {{"type", "linear"}, {"factor", 0}};
    CHECK_THAT(ParseError(j), Catch::Contains("rope_scaling: 'factor'"));
    j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8}, {"low_freq_factor", -1}};
    CHECK_THAT(ParseError(j), Catch::Contains("rope_scaling: 'low_freq_factor'"));
    j["rope_scaling"] = {
        {"rope_type", "llama3"}, {"factor", 8}, {"original_max_position_embeddings", "long"}};
    CHECK_THAT(ParseError(j), Catch::Contains("rope_scaling: 'original_max_position_embeddings'"));
  }
  SECTION("unknown architecture lists the supported ones") {
    j["architectures"] = {"GPT2LMHeadModel"};
    const std::string e = ParseError(j);
    CHECK_THAT(e, Catch::Contains("GPT2LMHeadModel") && Catch::Contains("LlamaForCausalLM") &&
                      Catch::Contains("MistralForCausalLM") &&
                      Catch::Contains("Qwen2ForCausalLM") && Catch::Contains("Qwen3ForCausalLM"));
  }
  SECTION("bad eos") {
    j["eos_token_id"] = "two";
    CHECK_THAT(ParseError(j), Catch::Contains("eos_token_id"));
  }
}

}  // namespace
}  // namespace medq::engine::test
