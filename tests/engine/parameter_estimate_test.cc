// EstimateParameterBytes (parameter_estimate.h) against what the loader holds
// (ModelInfo::parameter_bytes, counted from the tensors' storage): equal, to
// the byte, for every fixture in fp32 and bf16, unquantized (packed for
// batches or not), int8 and int4, with and without quantize_embeddings.
#include <catch2/catch.hpp>

#include "daemon/engine/parameter_estimate.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

TEST_CASE("the parameter estimate from config.json equals the loaded model's bytes",
          "[engine][quantize][estimate]") {
  for (const auto& dir : ModelFolders()) {
    const auto config = LoadModelConfig(dir);
    REQUIRE(config.ok());
    for (const std::string dtype : {"fp32", "bf16"}) {
      for (const std::string q : {"none", "int8", "int4"}) {
        for (const bool embeddings : {false, true}) {
          for (const bool pack : {false, true}) {
            INFO("model " << dir.filename().string() << " " << dtype << " " << q
                          << (embeddings ? " + embeddings" : "") << (pack ? " packed" : ""));
            LoadOptions o{"cpu", dtype, pack};
            o.quantize = q;
            o.quantize_group = 32;  // the fixtures' hidden sizes are 32 and 64
            o.quantize_embeddings = embeddings;
            const auto m = LoadModel(dir, o);
            REQUIRE(m.ok());
            WeightLayout layout;
            layout.matrix_element_bytes = dtype == "fp32" ? 4 : 2;
            layout.vector_element_bytes = 4;  // the CPU computes in float32
            layout.quantize = q;
            layout.quantize_group = 32;
            layout.quantize_embeddings = embeddings;
            layout.packed = pack && dtype == "bf16";  // only bf16 weights are packed
            CHECK(EstimateParameterBytes(*config, layout) == Info(**m).parameter_bytes);
          }
        }
      }
    }
  }
}

TEST_CASE("a matrix's bytes: element bytes, int8 rows with a scale, int4 groups with two",
          "[engine][quantize][estimate]") {
  WeightLayout bf16;
  CHECK(MatrixBytes(10, 64, bf16, true) == 10 * 64 * 2);  // "none" quantizes nothing
  WeightLayout int8 = bf16;
  int8.quantize = "int8";
  CHECK(MatrixBytes(10, 64, int8, true) == 10 * 64 + 10 * 4);
  CHECK(MatrixBytes(10, 64, int8, false) == 10 * 64 * 2);
  WeightLayout int4 = bf16;
  int4.quantize = "int4";
  int4.quantize_group = 32;
  CHECK(MatrixBytes(10, 64, int4, true) == 10 * 32 + 10 * 2 * 4);
}

TEST_CASE("on a GPU a tied int4 vocabulary matrix counts twice, int8 and untied ones once",
          "[engine][quantize][estimate]") {
  const auto config = LoadModelConfig(medq::test::ModelFixture("tiny-qwen2"));  // tied
  REQUIRE(config.ok());
  REQUIRE(config->tie_word_embeddings);
  WeightLayout cpu;
  cpu.quantize = "int4";
  cpu.quantize_group = 32;
  cpu.quantize_embeddings = true;
  WeightLayout gpu = cpu;
  gpu.gpu_layout = true;
  const int64_t vocab = MatrixBytes(config->vocab_size, config->hidden_size, cpu, true);
  CHECK(EstimateParameterBytes(*config, gpu) == EstimateParameterBytes(*config, cpu) + vocab);
  cpu.quantize = gpu.quantize = "int8";
  CHECK(EstimateParameterBytes(*config, gpu) == EstimateParameterBytes(*config, cpu));
  cpu.quantize = gpu.quantize = "int4";
  cpu.quantize_embeddings = gpu.quantize_embeddings = false;
  CHECK(EstimateParameterBytes(*config, gpu) == EstimateParameterBytes(*config, cpu));
}

}  // namespace
}  // namespace medq::engine::test
