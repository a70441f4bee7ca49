// Quantized weights in the form a GPU holds them (device_quantized.h): the
// conversion of medq's int4 to LibTorch's, and, where this LibTorch has the
// int4 ops (2.6 and later: the CUDA build's), the CPU twin of the GPU's
// path: Linear() through _weight_int4pack_mm and whole models decoding
// through it, against medq's own int4 kernels. The GPU itself: gpu_test.cc.
#include <ATen/ATen.h>

#include <catch2/catch.hpp>

#include "daemon/engine/device_quantized.h"
#include "daemon/engine/kernels/linear.h"
#include "daemon/engine/quantize.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

namespace medq::engine::test {
namespace {

constexpr const char* kNoInt4Ops =
    "this LibTorch has no int4 matrix product (2.6 and later; the CUDA build's has)";

// LibTorch's codes (two a byte, the first high) back to one a byte.
at::Tensor UnpackTorchCodes(const at::Tensor& codes) {
  const at::Tensor c = codes.to(at::kInt);
  return at::stack({c.bitwise_right_shift(4), c.bitwise_and(15)}, 2).view({c.size(0), -1});
}

// medq's int4 of a random matrix, groups of `group`.
QuantizedGroups RandomInt4(int64_t out, int64_t in, int64_t group, uint64_t seed) {
  at::manual_seed(seed);
  return QuantizeRowsInt4(at::randn({out, in}) * 0.05 + 0.01, group);
}

TEST_CASE("medq's int4 becomes LibTorch's codes and scale-and-zeros, the same weights",
          "[engine][quantize][int4]") {
  for (const int64_t group : {32, 64, 128}) {
    INFO("group " << group);
    const QuantizedGroups q = RandomInt4(48, 256, group, 7 + group);
    const TorchInt4Inputs t = TorchInt4From(q.values, q.params);
    REQUIRE(t.codes.scalar_type() == at::kByte);
    REQUIRE(t.codes.sizes() == at::IntArrayRef({48, 128}));
    REQUIRE(t.scale_zeros.scalar_type() == at::kFloat);
    REQUIRE(t.scale_zeros.sizes() == at::IntArrayRef({256 / group, 48, 2}));
    // (q - 8) · s + z, LibTorch's dequantization, against medq's fma(q, s, m):
    // z = m + 8 s is exact in float32 here, so the two differ by float32's
    // rounding of two operations, not by a code, a group or a row.
    const at::Tensor codes = UnpackTorchCodes(t.codes).to(at::kFloat);
    const at::Tensor s = t.scale_zeros.select(2, 0).t().repeat_interleave(group, 1);
    const at::Tensor z = t.scale_zeros.select(2, 1).t().repeat_interleave(group, 1);
    const at::Tensor theirs = (codes - 8) * s + z;
    const at::Tensor ours = DequantizeRowsInt4(q.values, q.params);
    CHECK(MaxAbsDiff(theirs, ours) <= 1e-6 * ours.abs().max().item<double>());
    // And the codes are medq's, each: a shifted nibble would move a weight
    // by a whole step.
    const at::Tensor steps = ((ours - z) / s + 8).round();
    CHECK(at::equal(steps.to(at::kInt), UnpackTorchCodes(t.codes)));
  }
}

TEST_CASE("int4 in a GPU's form needs LibTorch 2.6, naming the model", "[engine][quantize][int4]") {
  const auto full = MustLoad(medq::test::ModelFixture("tiny-llama"), "bf16");
  CHECK(CheckDeviceQuantization(full->weights, Quantization::kNone, at::kCPU, true, "m").ok());
  CHECK(CheckDeviceQuantization(full->weights, Quantization::kInt8, at::kCPU, true, "m").ok());
  if (TorchInt4Available()) MEDQ_SKIP("this LibTorch has the int4 ops (the next case checks it)");
  const Status int4 =
      CheckDeviceQuantization(full->weights, Quantization::kInt4, at::kCPU, true, "tiny-llama");
  REQUIRE_FALSE(int4.ok());
  CHECK(int4.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(int4.error().message,
             Catch::Contains("tiny-llama") && Catch::Contains("LibTorch 2.6"));
}

TEST_CASE("what a GPU's int4 form cannot hold is refused, naming the model and the matrix",
          "[engine][quantize][int4]") {
  if (!TorchInt4Available()) MEDQ_SKIP(kNoInt4Ops);
  const auto full = MustLoad(medq::test::ModelFixture("tiny-llama"), "bf16");
  CHECK(CheckDeviceQuantization(full->weights, Quantization::kInt4, at::kCPU, true, "m").ok());
  ModelWeights odd = full->weights;
  odd.layers[1].o_proj = odd.layers[1].o_proj.narrow(0, 0, 56);  // 56 rows: not a tile's 16
  const Status rows =
      CheckDeviceQuantization(odd, Quantization::kInt4, at::kCPU, false, "tiny-llama");
  REQUIRE_FALSE(rows.ok());
  CHECK(rows.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(rows.error().message,
             Catch::Contains("tiny-llama") && Catch::Contains("layer 1's o_proj has 56"));
  ModelWeights vocab = full->weights;
  vocab.lm_head = vocab.lm_head.narrow(0, 0, 1000);  // 1000 rows: not a tile's 16
  CHECK(CheckDeviceQuantization(vocab, Quantization::kInt4, at::kCPU, false, "m").ok());
  const Status lm_head =
      CheckDeviceQuantization(vocab, Quantization::kInt4, at::kCPU, true, "tiny-llama");
  REQUIRE_FALSE(lm_head.ok());
  CHECK_THAT(lm_head.error().message, Catch::Contains("tiny-llama") &&
                                          Catch::Contains("quantize_embeddings") &&
                                          Catch::Contains("lm_head has 1000"));
}

// Against the dequantized weights with x as it is: medq's own int4 products
// quantize x to int8 blocks first (dense_kernels.h), which LibTorch's do not.
TEST_CASE("Linear through LibTorch's int4 layout gives the product of medq's int4 weights",
          "[engine][quantize][int4]") {
  if (!TorchInt4Available()) MEDQ_SKIP(kNoInt4Ops);
  c10::InferenceMode guard;
  for (const int64_t in : {64, 128, 384}) {
    INFO("in " << in);
    const QuantizedGroups q = RandomInt4(32, in, 32, 11 + in);
    const TorchInt4Matrix t = ToTorchInt4(TorchInt4From(q.values, q.params), at::kCPU);
    for (const int64_t rows : {1, 3, 40}) {
      INFO(rows << " rows");
      const at::Tensor x = at::randn({rows, in});
      const at::Tensor bias = at::randn({32});
      REQUIRE(SelectLinearPath(x, t.weight, bias, t.scale) == LinearPath::kTorchInt4);
      const at::Tensor theirs = Linear(x, t.weight, bias, t.scale);
      const at::Tensor ours = at::linear(x, DequantizeRowsInt4(q.values, q.params), bias);
      REQUIRE(theirs.sizes() == ours.sizes());
      CHECK(MaxAbsDiff(theirs, ours) <= 1e-5 * ours.abs().max().item<double>());
    }
  }
}

TEST_CASE("a model in a GPU's int4 form decodes on the CPU as medq's int4 kernels do",
          "[engine][quantize][int4]") {
  if (!TorchInt4Available()) MEDQ_SKIP(kNoInt4Ops);
  for (const bool embeddings : {false, true}) {
    for (const char* name : {"tiny-llama", "tiny-llama3"}) {
      INFO(name << (embeddings ? " with quantize_embeddings" : ""));
      const fs::path dir = medq::test::ModelFixture(name);
      LoadOptions o{"cpu", "bf16"};
      o.quantize = "int4";
      o.quantize_group = 32;
      o.quantize_embeddings = embeddings;
      auto own = LoadModel(dir, o);
      REQUIRE(own.ok());
      std::shared_ptr<const Model> form;
      {
        const ScopedSwitch on(&SetDeviceQuantizedFormOnCpu, true, false);
        auto loaded = LoadModel(dir, o);
        REQUIRE(loaded.ok());
        form = *loaded;
      }
      CHECK(form->device_quantized_form);
      CHECK_FALSE((*own)->device_quantized_form);
      CHECK(Info(*form).quantization == "int4");
      // The same codes: LibTorch's layout is as big as medq's, its
      // scale-and-zeros float32 rather than bf16.
      const at::Tensor& w = form->weights.layers[0].qkv_proj;
      CHECK(w.scalar_type() == at::kByte);
      CHECK(form->weights.layers[0].qkv_scale.scalar_type() == at::kFloat);
      CHECK_FALSE(form->weights.layers[0].q_proj.defined());
      const auto ref = ReadTensors(dir / "reference.safetensors");
      const at::Tensor ids = ref.at("input_ids_prompt1");
      const at::Tensor a = AllLogits(*form, ids);
      const at::Tensor b = AllLogits(**own, ids);
      // LibTorch's products take x as it is, medq's round it (engine_test_util.h).
      INFO("max diff " << MaxAbsDiff(a, b) / b.abs().max().item<double>()
                       << " of the largest, relative L2 "
                       << (a - b).norm().item<double>() / b.norm().item<double>());
      CHECK(MaxAbsDiff(a, b) <= kXRoundingMaxDiff * b.abs().max().item<double>());
      CHECK((a - b).norm().item<double>() <= kXRoundingRelL2 * b.norm().item<double>());
      // It takes the device loop (only Linear reads its projections) and
      // generates through it.
      if (embeddings) {
        // The input embeddings in medq's layout, lm_head in LibTorch's.
        CHECK(form->weights.embed.scalar_type() == at::kByte);
        CHECK(form->weights.lm_head_scale.scalar_type() == at::kFloat);
        CHECK(form->weights.embed_scale.scalar_type() == at::kBFloat16);
      }
      c10::InferenceMode guard;
      CHECK(Greedy(*form, ToIds(ids), 8).size() == 8);
    }
  }
}

// The way an adapted model reaches a GPU whose memory cannot hold its base
// in full precision: merged and quantized on the CPU, then placed in the
// GPU's form; here that form on the CPU, against the adapted model on
// medq's own int4 kernels.
TEST_CASE("an adapter merged on the CPU, quantized, then placed in a GPU's int4 form",
          "[engine][quantize][int4]") {
  if (!TorchInt4Available()) MEDQ_SKIP(kNoInt4Ops);
  const auto base = MustLoad(medq::test::ModelFixture("tiny-llama"), "fp32");
  const fs::path adapter = medq::test::ModelFixture("tiny-llama-lora");
  auto own = ApplyAdapter(base, adapter, "int4", 32, false);
  REQUIRE(own.ok());
  std::shared_ptr<const Model> form;
  {
    const ScopedSwitch on(&SetDeviceQuantizedFormOnCpu, true, false);
    auto adapted = ApplyAdapter(base, adapter, "int4", 32, false, "cpu");
    REQUIRE(adapted.ok());
    form = *adapted;
  }
  CHECK(form->device_quantized_form);
  CHECK(Info(*form).quantization == "int4");
  const at::Tensor ids = at::tensor({1, 6989, 9503, 21829, 338}, at::kLong);
  const at::Tensor a = AllLogits(*form, ids);
  const at::Tensor b = AllLogits(**own, ids);
  CHECK(MaxAbsDiff(a, b) <= kXRoundingMaxDiff * b.abs().max().item<double>());
  CHECK((a - b).norm().item<double>() <= kXRoundingRelL2 * b.norm().item<double>());
  // A target that is the base's own device is no move: it takes any
  // quantization (the refusal of other moves needs a GPU to name).
  CHECK(ApplyAdapter(base, adapter, "none", 32, false, "cpu").ok());
}

}  // namespace
}  // namespace medq::engine::test
