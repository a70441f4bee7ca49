// Pre-quantized 4-bit checkpoints (prequantized.h): the fixtures of
// tools/model_fixtures/make_prequantized.py (AWQ GEMM, GPTQ v1 symmetric and
// asymmetric) load as int4; every projection is exactly the documented
// conversion of what the format denotes and within its stated bound of it;
// the model computes what a float32 model of those weights computes; and
// every format, option or tensor medq does not take is a clear refusal.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>

#include <nlohmann/json.hpp>

#include "daemon/engine/decode_step.h"
#include "daemon/engine/prequantized.h"
#include "daemon/engine/prequantized_config.h"
#include "daemon/engine/quantize.h"
#include "tests/engine/engine_test_util.h"

namespace medq::engine::test {
namespace {

using nlohmann::json;

const char* const kFormats[] = {"awq-gemm-g64", "gptq-sym-g128", "gptq-asym-g32"};

fs::path Fixture(const std::string& name) {
  return fs::path(MEDQ_ENGINE_TEST_DATA) / "prequantized" / name;
}

// One projection of layer 0: its Hugging Face name, its rows in the stack
// and the stack's values and params.
struct Projection {
  std::string name;
  at::Tensor values, params;
};

std::vector<Projection> Projections(const Model& m) {
  const LayerWeights& l = m.weights.layers.at(0);
  const int64_t q = m.config.num_heads * m.config.head_dim,
                kv = m.config.num_kv_heads * m.config.head_dim, i = m.config.intermediate_size;
  const auto rows = [](const at::Tensor& t, int64_t from, int64_t n) {
    return t.narrow(0, from, n);
  };
  const std::string a = "model.layers.0.self_attn.", p = "model.layers.0.mlp.";
  return {{a + "q_proj", rows(l.qkv_proj, 0, q), rows(l.qkv_scale, 0, q)},
          {a + "k_proj", rows(l.qkv_proj, q, kv), rows(l.qkv_scale, q, kv)},
          {a + "v_proj", rows(l.qkv_proj, q + kv, kv), rows(l.qkv_scale, q + kv, kv)},
          {a + "o_proj", l.o_proj, l.o_scale},
          {p + "gate_proj", rows(l.gate_up_proj, 0, i), rows(l.gate_up_scale, 0, i)},
          {p + "up_proj", rows(l.gate_up_proj, i, i), rows(l.gate_up_scale, i, i)},
          {p + "down_proj", l.down_proj, l.down_scale}};
}

// What the format denotes for one projection, from reference.safetensors:
// codes q, zeros z and scales s, each expanded to [out, in] (double).
struct Denoted {
  at::Tensor q, z, s;
  at::Tensor Weight() const { return (q - z) * s; }  // exact
};

Denoted ReadDenoted(const std::map<std::string, at::Tensor>& ref, const std::string& name) {
  const at::Tensor packed = ref.at(name + ".q").to(at::kLong);
  const int64_t out = packed.size(0), in = 2 * packed.size(1);
  Denoted d;
  d.q = at::stack({packed.bitwise_and(15), packed.div(16, "floor")}, 2)
            .reshape({out, in})
            .to(at::kDouble);
  const at::Tensor z = ref.at(name + ".z").to(at::kDouble);
  const int64_t group = in / z.size(1);
  d.z = z.repeat_interleave(group, 1);
  d.s = ref.at(name + ".scales").to(at::kDouble).repeat_interleave(group, 1);
  return d;
}

// prequantized.h's conversion done here from the reference: s' = bf16(s),
// m' = bf16(-z · s'), w' = fma(q, s', m') in float32.
at::Tensor Converted(const Denoted& d) {
  const at::Tensor s1 = d.s.to(at::kFloat).to(at::kBFloat16).to(at::kDouble);
  const at::Tensor m1 = (-d.z * s1).to(at::kFloat).to(at::kBFloat16).to(at::kDouble);
  return (d.q * s1 + m1).to(at::kFloat);  // the exact q · s' + m', rounded once
}

// A float32 copy of `dir`'s model with the projections `weights` (by Hugging
// Face name, [out, in]) written into `out`: config.json without its
// quantization_config, the other tensors widened from the checkpoint.
void WriteFloatModel(const fs::path& dir, const std::map<std::string, at::Tensor>& weights,
                     const fs::path& out) {
  fs::create_directories(out);
  json config = json::parse(ReadText(dir / "config.json"));
  config.erase("quantization_config");
  config["torch_dtype"] = "float32";
  WriteText(out / "config.json", config.dump(2));
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, t] : ReadTensors(dir / "model.safetensors")) {
    if (name.ends_with(".weight")) tensors[name] = t.to(at::kFloat).contiguous();
  }
  for (const auto& [name, w] : weights)
    tensors[name + ".weight"] = w.to(at::kFloat).contiguous();
  std::vector<StWriteTensor> list;
  for (const auto& [name, t] : tensors) {
    list.push_back(
        {name, StDtype::kF32, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.numel()) * 4});
  }
  REQUIRE(WriteSafetensors(out / "model.safetensors", list).ok());
}

// float32 by default, so that logits compare with float32 references; the
// dtype "auto" keeps an fp16 checkpoint's other matrices as bf16 (below).
Result<std::shared_ptr<const Model>> Load(const fs::path& dir, const std::string& quantize = "none",
                                          const std::string& dtype = "fp32") {
  LoadOptions o{"cpu", dtype};
  o.quantize = quantize;
  return LoadModel(dir, o);
}

TEST_CASE("on the CPU, dtype auto holds a pre-quantized fp16 checkpoint's other matrices as bf16",
          "[engine][prequantized]") {
  for (const char* format : kFormats) {
    INFO(format);
    auto small = Load(Fixture(format), "none", "auto");
    auto wide = Load(Fixture(format), "none", "fp32");
    REQUIRE(small.ok());
    REQUIRE(wide.ok());
    CHECK(Info(**small).dtype == "bf16");
    CHECK(Info(**wide).dtype == "fp32");
    // The embeddings (and lm_head) take half the bytes; the int4 projections
    // are the same.
    CHECK(Info(**small).parameter_bytes < Info(**wide).parameter_bytes);
    // bf16 keeps 8 bits of an fp16 embedding's 11: the logits stay close.
    const at::Tensor ids = at::tensor({1, 5, 9, 3}, at::kLong);
    const at::Tensor a = AllLogits(**small, ids), b = AllLogits(**wide, ids);
    CHECK(MaxAbsDiff(a, b) <= 0.05 * b.abs().max().item<double>());
  }
}

TEST_CASE("pre-quantized AWQ and GPTQ checkpoints load as int4", "[engine][prequantized]") {
  for (const char* format : kFormats) {
    INFO(format);
    auto m = Load(Fixture(format));
    REQUIRE(m.ok());
    CHECK((*m)->quantization == Quantization::kInt4);
    CHECK(Info(**m).quantization == "int4");
    // The projections are packed: their bytes are about an eighth of float32's.
    int64_t projection_bytes = 0, float_bytes = 0;
    for (const Projection& p : Projections(**m)) {
      CHECK(p.values.scalar_type() == at::kByte);
      CHECK(p.params.scalar_type() == at::kBFloat16);
      projection_bytes += p.values.numel() + 2 * p.params.numel();
      float_bytes += 4 * 2 * p.values.numel();
    }
    CHECK(projection_bytes < float_bytes / 6);
    CHECK(Info(**m).parameter_bytes < float_bytes / 2);
    // The checkpoint's own int4 wins over any quantize setting.
    for (const std::string q : {"int4", "int8"}) {
      auto again = Load(Fixture(format), q);
      REQUIRE(again.ok());
      CHECK(Info(**again).quantization == "int4");
    }
  }
}

TEST_CASE("every unpacked projection is what the format denotes, converted as documented",
          "[engine][prequantized]") {
  for (const char* format : kFormats) {
    INFO(format);
    auto m = Load(Fixture(format));
    REQUIRE(m.ok());
    const auto ref = ReadTensors(Fixture(format) / "reference.safetensors");
    double worst = 0;  // max |w' - w| / |s|
    for (const Projection& p : Projections(**m)) {
      INFO(p.name);
      const Denoted d = ReadDenoted(ref, p.name);
      const at::Tensor mine = DequantizeRowsInt4(p.values, p.params);
      // Bitwise the documented conversion of the reference's codes.
      CHECK(at::equal(mine, Converted(d)));
      // Within prequantized.h's bound of the exact dequantized weight:
      // 2^-8 |s| (|q - z| + (1 + 2^-8) z), plus the one float32 rounding.
      const at::Tensor exact = d.Weight();
      const at::Tensor error = (mine.to(at::kDouble) - exact).abs();
      const at::Tensor bound =
          std::ldexp(1.0, -8) * d.s.abs() * ((d.q - d.z).abs() + (1 + std::ldexp(1.0, -8)) * d.z) +
          std::ldexp(1.0, -24) * exact.abs();
      CHECK((error <= bound).all().item<bool>());
      worst = std::max(worst, (error / d.s.abs().clamp_min(1e-30)).max().item<double>());
    }
    CHECK(worst < 32.1 / 256);
    std::printf("prequantized %s: max |w' - w| = %.4f s\n", format, worst);
  }
}

TEST_CASE("a pre-quantized model computes what a float32 model of its weights computes",
          "[engine][prequantized]") {
  // The int4 products round x to int8 blocks (dense_kernels.h) for a prompt
  // of any length: the model's logits against a float32 model of exactly the
  // converted weights, held to engine_test_util.h's bounds for that rounding,
  // for 45 tokens (more rows than the products take in one block of x) and
  // for 10.
  std::vector<int64_t> long_ids;
  for (int64_t i = 0; i < 45; ++i)
    long_ids.push_back((7 * i + 3) % 31 + 1);
  const at::Tensor ids = at::tensor(long_ids, at::kLong);
  const at::Tensor short_ids = at::tensor({1, 5, 9, 3, 30, 17, 2, 8, 11, 4}, at::kLong);
  for (const char* format : kFormats) {
    INFO(format);
    auto m = Load(Fixture(format));
    REQUIRE(m.ok());
    const auto ref = ReadTensors(Fixture(format) / "reference.safetensors");
    std::map<std::string, at::Tensor> converted, exact;
    for (const Projection& p : Projections(**m)) {
      const Denoted d = ReadDenoted(ref, p.name);
      converted[p.name] = Converted(d);
      exact[p.name] = d.Weight();
    }
    TempDir tmp;
    WriteFloatModel(Fixture(format), converted, tmp.path() / "converted");
    WriteFloatModel(Fixture(format), exact, tmp.path() / "exact");
    const auto as_converted = MustLoad(tmp.path() / "converted", "fp32");
    const auto as_exact = MustLoad(tmp.path() / "exact", "fp32");
    for (const at::Tensor& prompt : {ids, short_ids}) {
      INFO(prompt.numel() << " tokens");
      const at::Tensor rounded = AllLogits(**m, prompt);
      const at::Tensor reference = AllLogits(*as_converted, prompt);
      CHECK(MaxAbsDiff(rounded, reference) <=
            kXRoundingMaxDiff * reference.abs().max().item<double>());
      CHECK((rounded - reference).norm().item<double>() <=
            kXRoundingRelL2 * reference.norm().item<double>());
    }
    // Generation takes the rounding products in the CPU decode step and in
    // the LibTorch path alike: the same tokens either way.
    const std::vector<int32_t> fast = Greedy(**m, {1, 5, 9}, 8);
    CHECK(fast.size() == 8);
    {
      const ScopedSwitch libtorch(&SetCpuDecodeStepEnabled, false, true);
      CHECK(Greedy(**m, {1, 5, 9}, 8) == fast);
    }
    // The converted weights against the format's exact ones, both in float32
    // models: each weight moved by at most 1/8 of a step (above), and the
    // logits, to first order, by the relative
    // size of that change in each of the four matrix products a layer
    // chains (qkv, o, gate/up, down) added up: 4 · max ||w' - w|| / ||w||.
    double relative = 0;
    for (const auto& [name, w] : exact) {
      relative = std::max(relative,
                          ((converted[name].to(at::kDouble) - w).norm() / w.norm()).item<double>());
    }
    const at::Tensor reference = AllLogits(*as_exact, ids);
    const double moved =
        MaxAbsDiff(AllLogits(*as_converted, ids), reference) / reference.abs().max().item<double>();
    std::printf(
        "prequantized %s: max relative weight change %.2e, logits moved %.2e of the "
        "largest\n",
        format, relative, moved);
    CHECK(moved <= 4 * relative);
  }
}

// A copy of the fixture `format` named `name` (so that messages can be
// checked for it) with `edit` applied to its config.json.
fs::path EditedCopy(const TempDir& tmp, const char* format, const std::string& name,
                    const std::function<void(json&)>& edit) {
  const fs::path dir = tmp.path() / name;
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors"})
    fs::copy_file(Fixture(format) / f, dir / f);
  json config = json::parse(ReadText(dir / "config.json"));
  edit(config);
  WriteText(dir / "config.json", config.dump(2));
  return dir;
}

void CheckRefused(const fs::path& dir, const std::string& reason) {
  auto m = Load(dir);
  REQUIRE_FALSE(m.ok());
  INFO(m.error().message);
  CHECK(m.error().code == ErrorCode::kInvalidRequest);
  CHECK(m.error().message.find(dir.filename().string()) != std::string::npos);
  CHECK(m.error().message.find(reason) != std::string::npos);
}

TEST_CASE("quantization configs medq does not load are refused, naming the model",
          "[engine][prequantized]") {
  TempDir tmp;
  const auto q = [](json& c) -> json& { return c["quantization_config"]; };
  CheckRefused(
      EditedCopy(tmp, "gptq-sym-g128", "desc-act-model", [&](json& c) { q(c)["desc_act"] = true; }),
      "desc_act true");
  CheckRefused(
      EditedCopy(tmp, "gptq-sym-g128", "eight-bit-model", [&](json& c) { q(c)["bits"] = 8; }),
      "8-bit");
  CheckRefused(
      EditedCopy(tmp, "gptq-asym-g32", "group-48-model", [&](json& c) { q(c)["group_size"] = 48; }),
      "groups of 48");
  CheckRefused(EditedCopy(tmp, "awq-gemm-g64", "bnb-model",
                          [&](json& c) {
                            q(c) = {{"quant_method", "bitsandbytes"}};
                          }),
               "quant_method 'bitsandbytes'");
  CheckRefused(
      EditedCopy(tmp, "awq-gemm-g64", "gemv-model", [&](json& c) { q(c)["version"] = "gemv"; }),
      "version 'gemv'");
  CheckRefused(EditedCopy(tmp, "awq-gemm-g64", "no-zero-point-model",
                          [&](json& c) { q(c)["zero_point"] = false; }),
               "zero_point false");
  CheckRefused(EditedCopy(tmp, "gptq-sym-g128", "marlin-model",
                          [&](json& c) { q(c)["checkpoint_format"] = "marlin"; }),
               "checkpoint_format 'marlin'");
  CheckRefused(EditedCopy(tmp, "awq-gemm-g64", "skip-model",
                          [&](json& c) { q(c)["modules_to_not_convert"] = {"mlp"}; }),
               "modules_to_not_convert");
  CheckRefused(
      EditedCopy(tmp, "awq-gemm-g64", "not-an-object-model", [&](json& c) { q(c) = "awq"; }),
      "not an object");
}

TEST_CASE("a group of a whole row and GPTQ v2 zeros are read as they say",
          "[engine][prequantized]") {
  TempDir tmp;
  auto base = Load(Fixture("gptq-sym-g128"));
  REQUIRE(base.ok());
  // Every input of the fixture is 128 wide: -1 means the same groups.
  auto row = Load(EditedCopy(tmp, "gptq-sym-g128", "row-groups",
                             [](json& c) { c["quantization_config"]["group_size"] = -1; }));
  REQUIRE(row.ok());
  // v2 stores zeros as they are: each one less than v1 reads.
  auto v2 = Load(EditedCopy(tmp, "gptq-sym-g128", "v2", [](json& c) {
    c["quantization_config"]["checkpoint_format"] = "gptq_v2";
  }));
  REQUIRE(v2.ok());
  const auto pb = Projections(**base), pr = Projections(**row), p2 = Projections(**v2);
  for (size_t i = 0; i < pb.size(); ++i) {
    INFO(pb[i].name);
    CHECK(at::equal(DequantizeRowsInt4(pb[i].values, pb[i].params),
                    DequantizeRowsInt4(pr[i].values, pr[i].params)));
    CHECK(at::equal(pb[i].values, p2[i].values));
    // Symmetric: z = 8 in v1, 7 in v2; w shifts by one scale.
    const at::Tensor shift = DequantizeRowsInt4(p2[i].values, p2[i].params) -
                             DequantizeRowsInt4(pb[i].values, pb[i].params);
    const at::Tensor scale = pb[i].params.select(2, 0).to(at::kFloat).repeat_interleave(128, 1);
    CHECK(at::allclose(shift, scale, 4e-2, 1e-6));
  }
}

// A copy of fixture `format` whose checkpoint has `edit` applied to its
// tensors (by name).
fs::path TensorEditedCopy(const TempDir& tmp, const char* format, const std::string& name,
                          const std::function<void(std::map<std::string, at::Tensor>&)>& edit) {
  const fs::path dir = tmp.path() / name;
  fs::create_directories(dir);
  fs::copy_file(Fixture(format) / "config.json", dir / "config.json");
  auto tensors = ReadTensors(Fixture(format) / "model.safetensors");
  edit(tensors);
  std::vector<StWriteTensor> list;
  for (auto& [n, t] : tensors) {
    t = t.contiguous();
    StDtype d = StDtype::kF32;
    switch (t.scalar_type()) {
      case at::kInt:
        d = StDtype::kI32;
        break;
      case at::kLong:
        d = StDtype::kI64;
        break;
      case at::kHalf:
        d = StDtype::kF16;
        break;
      case at::kByte:
        d = StDtype::kU8;
        break;
      default:
        break;
    }
    list.push_back(
        {n, d, t.sizes().vec(), t.data_ptr(), static_cast<size_t>(t.numel() * t.element_size())});
  }
  REQUIRE(WriteSafetensors(dir / "model.safetensors", list).ok());
  return dir;
}

TEST_CASE("malformed packed tensors are clear errors, never a crash", "[engine][prequantized]") {
  TempDir tmp;
  const std::string q = "model.layers.0.self_attn.q_proj.";
  const std::string down = "model.layers.0.mlp.down_proj.";
  const auto refused = [](const fs::path& dir, const std::string& tensor, const std::string& why) {
    auto m = Load(dir);
    REQUIRE_FALSE(m.ok());
    INFO(m.error().message);
    CHECK(m.error().code == ErrorCode::kInvalidRequest);
    CHECK(m.error().message.find(tensor) != std::string::npos);
    CHECK(m.error().message.find(why) != std::string::npos);
  };
  for (const char* format : {"awq-gemm-g64", "gptq-asym-g32"}) {
    INFO(format);
    const std::string f = format;
    refused(TensorEditedCopy(tmp, format, f + "-float-qweight",
                             [&](auto& t) { t[q + "qweight"] = t[q + "qweight"].to(at::kFloat); }),
            q + "qweight", "not int32");
    refused(TensorEditedCopy(tmp, format, f + "-short-qweight",
                             [&](auto& t) { t[q + "qweight"] = t[q + "qweight"].narrow(0, 0, 8); }),
            q + "qweight", "has shape");
    refused(
        TensorEditedCopy(tmp, format, f + "-flat-qzeros",
                         [&](auto& t) { t[down + "qzeros"] = t[down + "qzeros"].reshape({-1}); }),
        down + "qzeros", "has shape");
    refused(TensorEditedCopy(tmp, format, f + "-uint8-qzeros",
                             [&](auto& t) { t[q + "qzeros"] = t[q + "qzeros"].to(at::kByte); }),
            q + "qzeros", "not int32");
    refused(
        TensorEditedCopy(tmp, format, f + "-no-scales", [&](auto& t) { t.erase(q + "scales"); }),
        q + "scales", "missing");
    refused(TensorEditedCopy(tmp, format, f + "-wide-scales",
                             [&](auto& t) {
                               t[q + "scales"] = at::cat({t[q + "scales"], t[q + "scales"]}, 1);
                             }),
            q + "scales", "has shape");
    refused(TensorEditedCopy(tmp, format, f + "-nan-scale",
                             [&](auto& t) {
                               t[down + "scales"] = t[down + "scales"].clone();
                               t[down + "scales"][0][3] = NAN;
                             }),
            down + "scales", "not finite");
    refused(TensorEditedCopy(tmp, format, f + "-plain-weight",
                             [&](auto& t) {
                               t[q + "weight"] = at::zeros({128, 128}, at::kHalf);
                             }),
            q + "weight", "unexpected");
  }
  refused(TensorEditedCopy(tmp, "gptq-asym-g32", "permuted-g-idx",
                           [&](auto& t) { t[q + "g_idx"] = t[q + "g_idx"].flip(0).contiguous(); }),
          q + "g_idx", "permutes");
}

TEST_CASE("a LoRA adapter on a pre-quantized base is refused", "[engine][prequantized]") {
  auto m = Load(Fixture("awq-gemm-g64"));
  REQUIRE(m.ok());
  auto adapted = ApplyAdapter(*m, Fixture("no-adapter-needed"));
  REQUIRE_FALSE(adapted.ok());
  CHECK(adapted.error().code == ErrorCode::kInvalidRequest);
  CHECK(adapted.error().message.find("awq-gemm-g64") != std::string::npos);
  CHECK(adapted.error().message.find("pre-quantized") != std::string::npos);
}

TEST_CASE("quantization_config is read as the tools write it", "[engine][prequantized]") {
  const auto parse = [](const json& q) {
    return ParsePrequantizedConfig(json{{"quantization_config", q}}, "some-model/config.json");
  };
  // AutoAWQ's own key names and its upper-case version.
  auto awq = parse({{"quant_method", "awq"},
                    {"w_bit", 4},
                    {"q_group_size", 128},
                    {"version", "GEMM"},
                    {"zero_point", true}});
  REQUIRE(awq.ok());
  CHECK(awq->format == PrequantizedFormat::kAwqGemm);
  CHECK(awq->group == 128);
  CHECK(awq->zero_offset == 0);
  // GPTQ with desc_act, sym and checkpoint_format absent: auto-gptq's v1.
  auto gptq = parse({{"quant_method", "gptq"}, {"bits", 4}, {"group_size", -1}});
  REQUIRE(gptq.ok());
  CHECK(gptq->format == PrequantizedFormat::kGptq);
  CHECK(gptq->group == -1);
  CHECK(gptq->zero_offset == 1);
  auto none = ParsePrequantizedConfig(json{{"quantization_config", nullptr}}, "x");
  REQUIRE(none.ok());
  CHECK(none->format == PrequantizedFormat::kNone);
  CHECK(ParsePrequantizedConfig(json::object(), "x")->format == PrequantizedFormat::kNone);
  for (const json& bad :
       {json{{"quant_method", "gptq"}, {"bits", "4"}, {"group_size", 128}},
        json{{"quant_method", "gptq"}, {"group_size", 128}},
        json{{"quant_method", "awq"}, {"bits", 4}, {"group_size", 0}},
        json{{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 128}, {"desc_act", "no"}},
        json{{"bits", 4}, {"group_size", 128}}}) {
    INFO(bad.dump());
    auto r = parse(bad);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK(r.error().message.find("some-model") != std::string::npos);
  }
}

TEST_CASE("Int4GroupFor maps a checkpoint's groups onto medq's", "[engine][prequantized]") {
  CHECK(Int4GroupFor(32, 4096) == 32);
  CHECK(Int4GroupFor(64, 4096) == 64);
  CHECK(Int4GroupFor(128, 4096) == 128);
  CHECK(Int4GroupFor(256, 4096) == 128);
  CHECK(Int4GroupFor(-1, 4096) == 128);
  CHECK(Int4GroupFor(-1, 96) == 32);
  CHECK(Int4GroupFor(48, 4096) == 0);
  CHECK(Int4GroupFor(-1, 100) == 0);
}

}  // namespace
}  // namespace medq::engine::test
