// Where the engine puts the weight copies it makes on the CPU
// (host_memory.h): big ones on 2 MiB boundaries, advised for transparent huge
// pages; tensors mapped from the checkpoint as they are stay shared.
#include <catch2/catch.hpp>

#include <cstdint>
#include <fstream>
#include <sstream>

#include "daemon/engine/host_memory.h"
#include "tests/engine/engine_test_util.h"
#include "tests/support/skip.h"

namespace medq::engine::test {
namespace {

constexpr uintptr_t kTwoMiB = uintptr_t{2} << 20;

uintptr_t Address(const at::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr());
}

// The block of /proc/self/smaps describing the mapping that holds `address`.
std::string SmapsEntry(uintptr_t address) {
  std::ifstream in("/proc/self/smaps");
  std::string line, entry;
  bool inside = false;
  while (std::getline(in, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      if (inside) return entry;
      inside = begin <= address && address < end;
    }
    if (inside) entry += line + "\n";
  }
  return entry;
}

// The rest of the line after `key` in an smaps entry, without the spaces.
std::string Field(const std::string& entry, const std::string& key) {
  const size_t at = entry.find(key);
  if (at == std::string::npos) return "";
  const size_t begin = entry.find_first_not_of(' ', at + key.size());
  return entry.substr(begin, entry.find('\n', begin) - begin);
}

// A one-layer Llama whose projections are 4 to 12 MiB in float32 and whose
// embedding is 1 MiB, in bfloat16 on disk.
void WriteBigLayerModel(const fs::path& dir) {
  WriteText(dir / "config.json", R"({"architectures": ["LlamaForCausalLM"], "hidden_size": 1024,
    "num_hidden_layers": 1, "num_attention_heads": 8, "num_key_value_heads": 8,
    "intermediate_size": 1024, "vocab_size": 256, "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})");
  const int64_t h = 1024;
  std::vector<uint16_t> ones(static_cast<size_t>(h), 0x3f80), matrix(static_cast<size_t>(h * h));
  for (size_t i = 0; i < matrix.size(); ++i)
    matrix[i] = static_cast<uint16_t>(0x3c00 + i % 97);  // small distinct values
  std::vector<StWriteTensor> t;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, const uint16_t* data) {
    int64_t n = 1;
    for (const int64_t d : shape)
      n *= d;
    t.push_back({name, StDtype::kBF16, std::move(shape), data, static_cast<size_t>(n) * 2});
  };
  add("model.embed_tokens.weight", {256, h}, matrix.data());
  add("model.norm.weight", {h}, ones.data());
  const std::string p = "model.layers.0.";
  add(p + "input_layernorm.weight", {h}, ones.data());
  add(p + "post_attention_layernorm.weight", {h}, ones.data());
  for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                        "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"}) {
    add(p + m + ".weight", {h, h}, matrix.data());
  }
  const Status written = WriteSafetensors(dir / "model.safetensors", t);
  REQUIRE(written.ok());
}

TEST_CASE("big host weights start on a 2 MiB boundary, advised for huge pages",
          "[engine][memory]") {
  const at::Tensor big = EmptyHostWeight({3, 1 << 18}, at::kFloat);  // 3 MiB
  REQUIRE(big.sizes() == at::IntArrayRef({3, 1 << 18}));
  CHECK(big.scalar_type() == at::kFloat);
  CHECK(big.is_contiguous());
  CHECK(Address(big) % kTwoMiB == 0);
  CHECK(IsHugePageAdvised(big));
  big.fill_(1.5f);  // every page writable
  CHECK(big.sum().item<double>() == 1.5 * 3 * (1 << 18));
  CHECK(IsHugePageAdvised(big.narrow(0, 1, 1)));  // views share the storage

  const at::Tensor small = EmptyHostWeight({1000}, at::kBFloat16);
  CHECK(small.numel() == 1000);
  CHECK_FALSE(IsHugePageAdvised(small));
  CHECK_FALSE(IsHugePageAdvised(at::empty({1 << 20})));
}

TEST_CASE("a big host weight's mapping goes when its last tensor does", "[engine][memory]") {
  at::Tensor big = EmptyHostWeight({5 << 20}, at::kByte);
  const uintptr_t address = Address(big);
  at::Tensor view = big.narrow(0, 1 << 20, 1 << 20);
  big.reset();
  CHECK_FALSE(SmapsEntry(address).empty());  // the view holds it
  view.reset();
  CHECK(SmapsEntry(address).find("rw-p") == std::string::npos);
}

TEST_CASE("the kernel takes the huge-page advice", "[engine][memory]") {
  const std::string mode = ReadText("/sys/kernel/mm/transparent_hugepage/enabled");
  if (mode.empty() || mode.find("[never]") != std::string::npos) {
    MEDQ_SKIP("transparent huge pages are off on this machine ('" << mode << "')");
  }
  const at::Tensor big = EmptyHostWeight({4 << 20}, at::kByte);
  const std::string entry = SmapsEntry(Address(big));
  INFO(entry);
  CHECK(Field(entry, "THPeligible:") == "1");
  std::istringstream flags(Field(entry, "VmFlags:"));
  bool advised = false;
  for (std::string flag; flags >> flag;)
    advised = advised || flag == "hg";
  CHECK(advised);  // MADV_HUGEPAGE
}

TEST_CASE("weight copies the engine makes are advised, mapped weights stay shared",
          "[engine][memory]") {
  TempDir dir;
  WriteBigLayerModel(dir.path());
  const auto f32 = MustLoad(dir.path(), "fp32");
  const auto bf16 = MustLoad(dir.path(), "bf16");
  const LayerWeights& a = f32->weights.layers.at(0);
  const LayerWeights& b = bf16->weights.layers.at(0);
  {
    INFO("float32: every matrix is a converted copy");
    CHECK(IsHugePageAdvised(a.qkv_proj));
    CHECK(IsHugePageAdvised(a.q_proj));  // a view of the stack
    CHECK(IsHugePageAdvised(a.gate_up_proj));
    CHECK(IsHugePageAdvised(a.o_proj));
    CHECK(IsHugePageAdvised(a.down_proj));
    CHECK(Address(a.o_proj) % kTwoMiB == 0);
    CHECK_FALSE(IsHugePageAdvised(f32->weights.embed));  // 1 MiB: the allocator's
  }
  {
    INFO("bfloat16: the fused stacks are copies, the rest is the checkpoint's mapping");
    CHECK(IsHugePageAdvised(b.qkv_proj));
    CHECK(IsHugePageAdvised(b.gate_up_proj));
    CHECK_FALSE(IsHugePageAdvised(b.o_proj));
    CHECK_FALSE(IsHugePageAdvised(b.down_proj));
  }
  {
    INFO("the copies hold the checkpoint's values");
    CHECK(at::equal(a.qkv_proj, b.qkv_proj.to(at::kFloat)));
    CHECK(at::equal(a.o_proj, b.o_proj.to(at::kFloat)));
    CHECK(at::equal(a.gate_up_proj, b.gate_up_proj.to(at::kFloat)));
    CHECK(at::equal(a.down_proj, b.down_proj.to(at::kFloat)));
  }
}

}  // namespace
}  // namespace medq::engine::test
