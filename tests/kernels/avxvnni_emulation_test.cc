// The AVX-VNNI int4 and int8 products (int4_avxvnni.cc, int8_avxvnni.cc) on
// a CPU without AVX-VNNI: built again with avxvnni_emulation.h forced in
// front (CMakeLists.txt), they must give bitwise what the AVX2 kernels give,
// as dense_kernels.h promises of them, at every width, row count, row range
// and bias; the emulated instruction itself is held to the SDM's definition
// of vpdpbusd. int4_test and int8_test run the real ones where the CPU has
// AVX-VNNI (Intel Alder Lake and later); this test runs wherever AVX2 does.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "daemon/engine/kernels/cpu_features.h"
#include "daemon/engine/kernels/dense_kernels.h"
#include "tests/support/skip.h"

#ifndef MatVecI4AvxVnni
#error "built without tests/kernels/avxvnni_emulation.h (CMakeLists.txt forces it in)"
#endif

namespace medq::engine::kernels {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// vpdpbusd as the SDM states it, one 32-bit lane at a time, wrapping.
void ReferenceDpbusd(int32_t* acc, const uint8_t* a, const int8_t* b) {
  for (int j = 0; j < 8; ++j) {
    int64_t sum = 0;
    for (int u = 0; u < 4; ++u)
      sum += static_cast<int64_t>(a[4 * j + u]) * b[4 * j + u];
    acc[j] = static_cast<int32_t>(static_cast<uint32_t>(acc[j]) + static_cast<uint32_t>(sum));
  }
}

// The emulated instruction (the macro avxvnni_emulation.h defines) on 32
// bytes at a and b, into acc.
[[gnu::target("avx2")]] void EmulatedDpbusdInto(int32_t* acc, const uint8_t* a, const int8_t* b) {
  const __m256i r =
      _mm256_dpbusd_avx_epi32(_mm256_loadu_si256(reinterpret_cast<__m256i*>(acc)),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a)),
                              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(acc), r);
}

TEST_CASE("the emulated vpdpbusd is the SDM's, extremes and wrapping included", "[int4][int8]") {
  if (!CpuSupportsAvx2Fma()) MEDQ_SKIP("this CPU has no AVX2");
  torch::manual_seed(60);
  for (int round = 0; round < 200; ++round) {
    const torch::Tensor a = torch::randint(0, 256, {32}).to(torch::kByte);
    const torch::Tensor b = torch::randint(-128, 128, {32}).to(torch::kChar);
    const torch::Tensor acc = torch::randint(-(1 << 30), 1 << 30, {8}).to(torch::kInt);
    uint8_t ua[32];
    int8_t sb[32];
    int32_t expected[8], got[8];
    std::memcpy(ua, a.data_ptr<uint8_t>(), 32);
    std::memcpy(sb, b.data_ptr<int8_t>(), 32);
    std::memcpy(expected, acc.data_ptr<int32_t>(), sizeof expected);
    if (round == 0) {  // the largest products of either sign
      std::memset(ua, 255, 32);
      for (int t = 0; t < 32; ++t)
        sb[t] = t < 16 ? -128 : 127;
    }
    if (round == 1) {  // a sum that wraps past int32's largest
      std::memset(ua, 255, 32);
      std::memset(sb, 127, 32);
      for (int32_t& e : expected)
        e = std::numeric_limits<int32_t>::max() - 1000;
    }
    std::memcpy(got, expected, sizeof got);
    EmulatedDpbusdInto(got, ua, sb);
    ReferenceDpbusd(expected, ua, sb);
    INFO("round " << round);
    REQUIRE(std::memcmp(got, expected, sizeof got) == 0);
  }
}

// The row counts a tile takes (one to four x rows) and those that need
// several tiles; row ranges whole and cut at both ends (a thread's share).
const std::vector<int64_t> kRowCounts = {1, 2, 3, 4, 5, 7, 8, 9};

struct Range {
  int64_t begin, end;
};
std::vector<Range> RangesOf(int64_t out) {
  std::vector<Range> ranges = {{0, out}};
  if (out > 2) ranges.push_back({1, out - 1});
  return ranges;
}

struct Int4Case {
  int64_t out, in, group;
};

// One x row rounded and laid out for the int4 products by the AVX2 table.
struct PreparedI4 {
  std::vector<int8_t> q;
  std::vector<float> lane_scale, group_sum;
  I4Rows rows() const { return {q.data(), lane_scale.data(), group_sum.data(), in, group}; }
  int64_t in = 0, group = 0;
};
PreparedI4 PrepareI4(const torch::Tensor& x, int64_t group) {
  PreparedI4 p;
  p.in = x.size(1);
  p.group = group;
  const int64_t m = x.size(0);
  p.q.resize(static_cast<size_t>(m * I4RowBytes(p.in)));
  p.lane_scale.resize(static_cast<size_t>(m * I4RowLaneScales(p.in)));
  p.group_sum.resize(static_cast<size_t>(m * I4RowGroupSums(p.in, group)));
  PrepareI4Rows(QuantizeXBlockAvx2, x.data_ptr<float>(), m, p.in, group, p.q.data(),
                p.lane_scale.data(), p.group_sum.data());
  return p;
}

TEST_CASE("AVX-VNNI int4 products, emulated, equal the AVX2 ones bitwise", "[int4]") {
  if (!CpuSupportsAvx2Fma()) MEDQ_SKIP("this CPU has no AVX2");
  torch::manual_seed(61);
  // Widths of whole spans, of a last span of 1 to 15 blocks (plain below
  // eight, interleaved from eight), and real models'; every group size.
  const std::vector<Int4Case> cases = {
      {3, 32, 32},    {5, 96, 32},  {4, 128, 64}, {7, 128, 128}, {9, 192, 64},   {64, 576, 64},
      {40, 896, 128}, {3, 992, 32}, {4, 544, 32}, {3, 1536, 64}, {24, 4864, 64}, {6, 512, 128},
  };
  for (const Int4Case& c : cases) {
    const torch::Tensor packed = torch::randint(0, 256, {c.out, c.in / 2}).to(torch::kByte);
    const torch::Tensor scale = torch::rand({c.out, c.in / c.group, 1}).mul_(0.01).add_(1e-4);
    const torch::Tensor min = torch::randn({c.out, c.in / c.group, 1}).mul_(0.05);
    const torch::Tensor params = torch::cat({scale, min}, 2).to(torch::kBFloat16).contiguous();
    const torch::Tensor bias = torch::randn({c.out});
    const auto* w = packed.data_ptr<uint8_t>();
    const auto* pw = reinterpret_cast<const uint16_t*>(params.data_ptr<at::BFloat16>());
    for (int64_t m : kRowCounts) {
      const PreparedI4 x = PrepareI4(torch::randn({m, c.in}), c.group);
      for (const float* b : std::vector<const float*>{nullptr, bias.data_ptr<float>()}) {
        for (const Range& range : RangesOf(c.out)) {
          INFO(c.out << "x" << c.in << " group " << c.group << " m=" << m << " rows ["
                     << range.begin << ", " << range.end << ")" << (b ? " bias" : ""));
          std::vector<float> vnni(static_cast<size_t>(m * c.out), -1.0f), avx2 = vnni;
          MatRowsI4AvxVnni(w, pw, x.rows(), c.out, m, b, vnni.data(), range.begin, range.end);
          MatRowsI4Avx2(w, pw, x.rows(), c.out, m, b, avx2.data(), range.begin, range.end);
          REQUIRE(SameBits(vnni, avx2));
          if (m != 1) continue;
          std::vector<float> one(static_cast<size_t>(c.out), -1.0f), one_avx2 = one;
          MatVecI4AvxVnni(w, pw, x.rows(), b, one.data(), range.begin, range.end);
          MatVecI4Avx2(w, pw, x.rows(), b, one_avx2.data(), range.begin, range.end);
          REQUIRE(SameBits(one, one_avx2));
        }
      }
    }
  }
}

TEST_CASE("AVX-VNNI int4 products, emulated, at the largest integer sums", "[int4]") {
  if (!CpuSupportsAvx2Fma()) MEDQ_SKIP("this CPU has no AVX2");
  // Every code 15 against x at ±127 (a constant row rounds to 127 in every
  // block): the sums the AVX2 products keep in 16 bits are at their largest.
  for (const int64_t in : {512, 896}) {
    const torch::Tensor packed = torch::full({8, in / 2}, 0xFF, torch::kByte);
    const torch::Tensor params = torch::full({8, in / 64, 2}, 0.01, torch::kBFloat16);
    const auto* pw = reinterpret_cast<const uint16_t*>(params.data_ptr<at::BFloat16>());
    for (const float sign : {1.0f, -1.0f}) {
      for (int64_t m : {1, 4}) {
        INFO("in " << in << " x " << sign << " m=" << m);
        const PreparedI4 x = PrepareI4(torch::full({m, in}, sign), 64);
        std::vector<float> vnni(static_cast<size_t>(m * 8), -1.0f), avx2 = vnni;
        MatRowsI4AvxVnni(packed.data_ptr<uint8_t>(), pw, x.rows(), 8, m, nullptr, vnni.data(), 0,
                         8);
        MatRowsI4Avx2(packed.data_ptr<uint8_t>(), pw, x.rows(), 8, m, nullptr, avx2.data(), 0, 8);
        REQUIRE(SameBits(vnni, avx2));
      }
    }
  }
}

// x rows rounded and laid out for the int8 products by the AVX2 table.
struct PreparedI8 {
  std::vector<int8_t> q;
  std::vector<float> lane_scale;
  std::vector<int32_t> offset;
  int64_t in = 0;
  I8Rows rows() const { return {q.data(), lane_scale.data(), offset.data(), in}; }
};
PreparedI8 PrepareI8(const torch::Tensor& x) {
  PreparedI8 p;
  p.in = x.size(1);
  const int64_t m = x.size(0);
  p.q.resize(static_cast<size_t>(m * I8RowBytes(p.in)));
  p.lane_scale.resize(static_cast<size_t>(m * I8RowLanes(p.in)));
  p.offset.resize(static_cast<size_t>(m * I8RowLanes(p.in)));
  PrepareI8Rows(QuantizeXSpanAvx2, x.data_ptr<float>(), m, p.in, p.q.data(), p.lane_scale.data(),
                p.offset.data());
  return p;
}

TEST_CASE("AVX-VNNI int8 products, emulated, equal the AVX2 ones bitwise", "[int8]") {
  if (!CpuSupportsAvx2Fma()) MEDQ_SKIP("this CPU has no AVX2");
  torch::manual_seed(62);
  // Widths below, at and between a half chunk, a chunk and a span, with odd
  // tails, and real models'.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {
      {1, 1},    {3, 7},   {5, 31},   {2, 32},  {3, 33},    {5, 63},  {9, 72},
      {64, 576}, {3, 999}, {3, 1031}, {2, 513}, {40, 4864}, {5, 512}, {4, 1024},
  };
  for (const auto& [out, in] : shapes) {
    // The whole range, -128 too (the kernels read it; quantization never
    // writes it), and -128 and 127 everywhere for the largest sums.
    for (int fill : {0, -128, 127}) {
      torch::Tensor values = torch::randint(-128, 128, {out, in}).to(torch::kChar);
      if (fill != 0) values.fill_(fill);
      const torch::Tensor scales = torch::rand({out}).mul_(0.05).add_(1e-4);
      const torch::Tensor bias = torch::randn({out});
      const auto* w = values.data_ptr<int8_t>();
      const auto* s = scales.data_ptr<float>();
      for (int64_t m : kRowCounts) {
        const torch::Tensor xf = fill == 0 ? torch::randn({m, in}) : torch::full({m, in}, -1.0f);
        const PreparedI8 x = PrepareI8(xf);
        for (const float* b : std::vector<const float*>{nullptr, bias.data_ptr<float>()}) {
          for (const Range& range : RangesOf(out)) {
            INFO(out << "x" << in << " fill " << fill << " m=" << m << " rows [" << range.begin
                     << ", " << range.end << ")" << (b ? " bias" : ""));
            std::vector<float> vnni(static_cast<size_t>(m * out), -1.0f), avx2 = vnni;
            MatRowsI8AvxVnni(w, s, x.rows(), out, m, b, vnni.data(), range.begin, range.end);
            MatRowsI8Avx2(w, s, x.rows(), out, m, b, avx2.data(), range.begin, range.end);
            REQUIRE(SameBits(vnni, avx2));
            if (m != 1) continue;
            std::vector<float> one(static_cast<size_t>(out), -1.0f), one_avx2 = one;
            MatVecI8AvxVnni(w, s, x.rows(), b, one.data(), range.begin, range.end);
            MatVecI8Avx2(w, s, x.rows(), b, one_avx2.data(), range.begin, range.end);
            REQUIRE(SameBits(one, one_avx2));
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace medq::engine::kernels
