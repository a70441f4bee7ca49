// The CUDA decode attention kernels (daemon/engine/cuda/attention_kernels.cuh)
// run on the CPU through cuda_emulation.h, in every build: one split and
// the flash-decoding split kernel with its merge, launched as
// decode_kernels.cu's DecodeAttention launches them, against a
// double-precision softmax attention. Rows at positions 0, 31, 32, 130 and
// 600 (one key, a chunk's 32 keys and one more, several chunks, splits with
// no keys), each cache's slots past its position random (they must not
// count), GQA (two query heads a kv head), heads of 64, 40 (lanes without
// elements) and 128 (fewer keys a warp at a time) elements, with and
// without a sliding window of 100 keys. The GPU test (tests/engine/
// gpu_test.cc) runs the same kernels on a device, in every element type.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "tests/kernels/cuda_emulation.h"
// After the emulation, whose names it uses.
#include "daemon/engine/cuda/attention_kernels.cuh"

namespace medq::engine::cuda {
namespace {

constexpr int kHeads = 4, kKvHeads = 2;

struct Rows {
  std::vector<int64_t> positions, capacities;
  std::vector<std::vector<float>> keys, values;  // [kv_heads, capacity, d] each
  std::vector<uint64_t> key_table, value_table;
  RowTables Tables() const {
    return {key_table.data(), value_table.data(), nullptr,
            nullptr,          capacities.data(),  positions.data()};
  }
};

Rows MakeRows(int d, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  Rows r;
  r.positions = {0, 31, 32, 130, 600};
  for (const int64_t p : r.positions) {
    r.capacities.push_back(p + 7);
    std::vector<float> k(static_cast<size_t>(kKvHeads * (p + 7) * d));
    std::vector<float> v(k.size());
    for (float& x : k)
      x = normal(rng);
    for (float& x : v)
      x = normal(rng);
    r.keys.push_back(std::move(k));
    r.values.push_back(std::move(v));
  }
  for (size_t i = 0; i < r.keys.size(); ++i) {
    r.key_table.push_back(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(r.keys[i].data())));
    r.value_table.push_back(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(r.values[i].data())));
  }
  return r;
}

// softmax(q · kᵀ / sqrt(d)) · v over each row's keys begin .. position.
std::vector<double> Reference(const Rows& r, const std::vector<float>& q, int d, int64_t window) {
  std::vector<double> out(q.size());
  for (size_t row = 0; row < r.positions.size(); ++row) {
    const int64_t p = r.positions[row], capacity = r.capacities[row];
    const int64_t begin = window > 0 ? std::max<int64_t>(0, p - window + 1) : 0;
    for (int h = 0; h < kHeads; ++h) {
      const int64_t g = h / (kHeads / kKvHeads);
      const float* qh = q.data() + (row * kHeads + static_cast<size_t>(h)) * d;
      std::vector<double> weights;
      double largest = -INFINITY;
      for (int64_t s = begin; s <= p; ++s) {
        double dot = 0;
        for (int i = 0; i < d; ++i)
          dot += double{qh[i]} * r.keys[row][static_cast<size_t>((g * capacity + s) * d + i)];
        weights.push_back(dot / std::sqrt(double(d)));
        largest = std::max(largest, weights.back());
      }
      double total = 0;
      for (double& w : weights) {
        w = std::exp(w - largest);
        total += w;
      }
      for (int i = 0; i < d; ++i) {
        double sum = 0;
        for (int64_t s = begin; s <= p; ++s) {
          sum += weights[static_cast<size_t>(s - begin)] *
                 r.values[row][static_cast<size_t>((g * capacity + s) * d + i)];
        }
        out[(row * kHeads + static_cast<size_t>(h)) * d + static_cast<size_t>(i)] = sum / total;
      }
    }
  }
  return out;
}

// decode_kernels.cu's DecodeAttention, emulated, for float elements.
template <int kSlice>
std::vector<float> Attend(const Rows& r, const std::vector<float>& q, int d, int64_t window,
                          int splits) {
  using emulation::Launch;
  const auto rows = static_cast<unsigned>(r.positions.size());
  std::vector<float> out(q.size(), NAN);
  const size_t shared = static_cast<size_t>(kAttentionWarps) * static_cast<size_t>(d + 2);
  if (splits == 1) {
    Launch({kHeads, rows, 1}, 32 * kAttentionWarps, shared, [&] {
      DecodeAttentionKernel<float, kSlice, false>(q.data(), r.Tables(), out.data(), nullptr, kHeads,
                                                  kKvHeads, d, window);
    });
    return out;
  }
  std::vector<float> partials(rows * kHeads * static_cast<size_t>(splits) * (d + 2), NAN);
  Launch({kHeads, rows, static_cast<unsigned>(splits)}, 32 * kAttentionWarps, shared, [&] {
    DecodeAttentionKernel<float, kSlice, true>(q.data(), r.Tables(), out.data(), partials.data(),
                                               kHeads, kKvHeads, d, window);
  });
  Launch({kHeads, rows, 1}, static_cast<unsigned>((d + 31) / 32 * 32), 0,
         [&] { MergeSplitsKernel<float>(partials.data(), out.data(), kHeads, d, splits); });
  return out;
}

TEST_CASE("CUDA decode attention, emulated on the CPU, equals a double-precision reference",
          "[kernels][cuda]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (const int d : {64, 40, 128}) {
    const Rows rows = MakeRows(d, rng);
    std::vector<float> q(rows.positions.size() * kHeads * static_cast<size_t>(d));
    for (float& x : q)
      x = normal(rng);
    for (const int64_t window : {int64_t{0}, int64_t{100}}) {
      const std::vector<double> reference = Reference(rows, q, d, window);
      for (const int splits : {1, 3, 16}) {
        INFO("head_dim " << d << ", window " << window << ", splits " << splits);
        const std::vector<float> got =
            d <= 64 ? Attend<2>(rows, q, d, window, splits) : Attend<4>(rows, q, d, window, splits);
        double worst = 0;
        for (size_t i = 0; i < got.size(); ++i)
          worst = std::max(worst, std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - reference[i]));
        CHECK(worst <= 1e-5);
      }
    }
  }
}

}  // namespace
}  // namespace medq::engine::cuda
