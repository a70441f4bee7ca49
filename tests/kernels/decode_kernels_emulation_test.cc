// The CUDA decode kernels (daemon/engine/cuda/decode_kernels.cuh) run on
// the CPU through cuda_emulation.h, in every build, in float32, launched as
// decode_kernels.cu launches them, against double-precision references:
// - attention, one split and the flash-decoding split kernel with its
//   merge: rows at positions 0, 31, 32, 130 and 600 (one key, a chunk's 32
//   keys and one more, several chunks, splits with no keys), each cache's
//   slots past its position random (they must not count), GQA (two query
//   heads a kv head), heads of 64, 40 (lanes without elements) and 128
//   (fewer keys a warp at a time) elements, with and without a sliding
//   window of 100 keys;
// - RoPE with the cache write, with and without Qwen3's q/k norms, heads
//   of 64 and 128 elements (one and two warps a block);
// - SiLU·up;
// - the GEMV, plain, RMS-normed and over SiLU·up, 1, 3 and 16 rows, a weight
//   row on one warp and split over eight, with and without bias and
//   residual, 13 output rows (no whole number of blocks);
// - the int8 GEMV (quantized_kernels.cuh), 1, 3 and 16 rows, a row width
//   that leaves the last round of loads part-full, and int8
//   dequantization.
// The GPU test (tests/engine/gpu_test.cc) runs the same kernels on a
// device, in every element type.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <type_traits>
#include <vector>

#include "tests/kernels/cuda_emulation.h"
// After the emulation, whose names it uses.
#include "daemon/engine/cuda/decode_kernels.cuh"
#include "daemon/engine/cuda/quantized_kernels.cuh"

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
      // Every split count for 64-wide heads without a window; fewer of the
      // rest (each launch costs a second or so of emulated barriers).
      std::vector<int> split_counts = {1, 3, 16};
      if (d != 64 || window != 0) split_counts = {d == 40 ? 1 : 16, 3};
      for (const int splits : split_counts) {
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

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> normal;
  std::vector<float> v(n);
  for (float& x : v)
    x = normal(rng);
  return v;
}

uint64_t Address(const std::vector<float>& v) {
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(v.data()));
}

// The largest |got - want|, infinite where got is NaN.
double Worst(const std::vector<float>& got, const std::vector<double>& want) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::isnan(got[i]) ? INFINITY : std::fabs(got[i] - want[i]));
  return worst;
}

TEST_CASE("CUDA RoPE with the cache write, emulated on the CPU, equals a reference",
          "[kernels][cuda]") {
  std::mt19937 rng(7);
  const int heads = 4, kv_heads = 2, rows = 3;
  const float eps = 1e-6f;
  for (const int d : {64, 128}) {
    for (const bool norms : {false, true}) {
      INFO("head_dim " << d << (norms ? ", q/k norms" : ""));
      const int width = (heads + 2 * kv_heads) * d;
      const std::vector<float> qkv = Random(static_cast<size_t>(rows * width), rng);
      const std::vector<float> q_norm = Random(static_cast<size_t>(d), rng);
      const std::vector<float> k_norm = Random(static_cast<size_t>(d), rng);
      const std::vector<int64_t> positions = {0, 5, 9}, capacities = {4, 8, 12};
      std::vector<std::vector<float>> keys, values, cos, sin;
      std::vector<uint64_t> key_table, value_table, cos_table, sin_table;
      for (int r = 0; r < rows; ++r) {
        const auto cache = static_cast<size_t>(kv_heads * capacities[static_cast<size_t>(r)] * d);
        keys.push_back(std::vector<float>(cache, 0.0f));
        values.push_back(std::vector<float>(cache, 0.0f));
        cos.push_back(
            Random(static_cast<size_t>((positions[static_cast<size_t>(r)] + 1) * d), rng));
        sin.push_back(Random(cos.back().size(), rng));
      }
      for (int r = 0; r < rows; ++r) {
        key_table.push_back(Address(keys[static_cast<size_t>(r)]));
        value_table.push_back(Address(values[static_cast<size_t>(r)]));
        cos_table.push_back(Address(cos[static_cast<size_t>(r)]));
        sin_table.push_back(Address(sin[static_cast<size_t>(r)]));
      }
      const RowTables at{key_table.data(), value_table.data(), cos_table.data(),
                         sin_table.data(), capacities.data(),  positions.data()};
      std::vector<float> q_out(static_cast<size_t>(rows * heads * d), NAN);
      emulation::Launch({static_cast<unsigned>(heads + 2 * kv_heads), rows, 1},
                        static_cast<unsigned>((d / 2 + 31) / 32 * 32), 0, [&] {
                          RopeCacheWriteKernel<float>(qkv.data(), at,
                                                      norms ? q_norm.data() : nullptr,
                                                      norms ? k_norm.data() : nullptr, eps,
                                                      q_out.data(), heads, kv_heads, d);
                        });
      const int half = d / 2;
      for (int r = 0; r < rows; ++r) {
        const auto ru = static_cast<size_t>(r);
        const int64_t p = positions[ru], capacity = capacities[ru];
        for (int h = 0; h < heads + 2 * kv_heads; ++h) {
          const float* x = qkv.data() + static_cast<size_t>(r * width + h * d);
          std::vector<double> want(static_cast<size_t>(d)), got(static_cast<size_t>(d));
          const float* wrote;
          if (h >= heads + kv_heads) {  // a v head: copied
            wrote = values[ru].data() + ((h - heads - kv_heads) * capacity + p) * d;
            for (int i = 0; i < d; ++i)
              want[static_cast<size_t>(i)] = x[i];
          } else {
            const bool is_q = h < heads;
            const std::vector<float>& norm = is_q ? q_norm : k_norm;
            double scale = 1;
            if (norms) {
              double squares = 0;
              for (int i = 0; i < d; ++i)
                squares += double{x[i]} * x[i];
              scale = 1 / std::sqrt(squares / d + eps);
            }
            const auto in = [&](int i) {
              return x[i] * scale * (norms ? norm[static_cast<size_t>(i)] : 1.0);
            };
            const float* c = cos[ru].data() + p * d;
            const float* s = sin[ru].data() + p * d;
            for (int i = 0; i < half; ++i) {
              want[static_cast<size_t>(i)] = in(i)*c[i] - in(i + half) * s[i];
              want[static_cast<size_t>(i + half)] = in(i + half) * c[i + half] + in(i)*s[i + half];
            }
            wrote = is_q ? q_out.data() + (r * heads + h) * d
                         : keys[ru].data() + ((h - heads) * capacity + p) * d;
          }
          std::vector<float> written(wrote, wrote + d);
          INFO("row " << r << ", head " << h);
          CHECK(Worst(written, want) <= 1e-4);
        }
      }
    }
  }
}

TEST_CASE("CUDA SiLU·up, emulated on the CPU, equals a reference", "[kernels][cuda]") {
  std::mt19937 rng(9);
  const int64_t rows = 3, inter = 100;
  const std::vector<float> gate_up = Random(static_cast<size_t>(rows * 2 * inter), rng);
  std::vector<float> out(static_cast<size_t>(rows * inter), NAN);
  emulation::Launch({2, 1, 1}, 256, 0,
                    [&] { SiluMulKernel<float>(gate_up.data(), out.data(), rows, inter); });
  std::vector<double> want(out.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < inter; ++j) {
      const double gate = gate_up[static_cast<size_t>(r * 2 * inter + j)];
      const double up = gate_up[static_cast<size_t>(r * 2 * inter + inter + j)];
      want[static_cast<size_t>(r * inter + j)] = gate / (1 + std::exp(-gate)) * up;
    }
  }
  CHECK(Worst(out, want) <= 1e-5);
}

// decode_kernels.cu's LaunchGemv, emulated, with the split given.
template <int kM, GemvInput kIn>
void Gemv(const std::vector<float>& x, const std::vector<float>& w, const float* bias,
          const float* residual, std::vector<float>& y, int64_t n, int64_t k, int m,
          const std::vector<float>& norm, float eps, int split) {
  const int64_t rows_per_block = kGemvWarps / split;
  const auto blocks = static_cast<unsigned>((n + rows_per_block - 1) / rows_per_block);
  emulation::Launch({blocks, 1, 1}, 32 * kGemvWarps, 0, [&] {
    GemvKernel<float, kM, kIn>(x.data(), w.data(), bias, residual, y.data(), n, k, m, norm.data(),
                               eps, split);
  });
}

TEST_CASE("CUDA GEMV, emulated on the CPU, equals a reference", "[kernels][cuda]") {
  std::mt19937 rng(11);
  const int64_t n = 13, k = 2048;  // 512 vectors: every part of a split row has work
  const float eps = 1e-6f;
  const std::vector<float> w = Random(static_cast<size_t>(n * k), rng);
  const std::vector<float> bias = Random(static_cast<size_t>(n), rng);
  const std::vector<float> norm = Random(static_cast<size_t>(k), rng);
  for (const GemvInput input : {GemvInput::kPlain, GemvInput::kRmsNorm, GemvInput::kSiluMul}) {
    const int64_t x_width = input == GemvInput::kSiluMul ? 2 * k : k;
    for (const int m : {1, 3, 16}) {
      const std::vector<float> x = Random(static_cast<size_t>(m * x_width), rng);
      const std::vector<float> residual = Random(static_cast<size_t>(m * n), rng);
      for (const int split : {1, 8}) {
        for (const bool extras : {false, true}) {
          INFO("input " << static_cast<int>(input) << ", rows " << m << ", split " << split
                        << (extras ? ", bias and residual" : ""));
          std::vector<float> y(static_cast<size_t>(m * n), NAN);
          const float* b = extras ? bias.data() : nullptr;
          const float* res = extras ? residual.data() : nullptr;
          const auto run = [&](auto in) {
            constexpr GemvInput kIn = decltype(in)::value;
            if (m == 1) {
              Gemv<1, kIn>(x, w, b, res, y, n, k, m, norm, eps, split);
            } else if (m <= 4) {
              Gemv<4, kIn>(x, w, b, res, y, n, k, m, norm, eps, split);
            } else {
              Gemv<16, kIn>(x, w, b, res, y, n, k, m, norm, eps, split);
            }
          };
          switch (input) {
            case GemvInput::kPlain:
              run(std::integral_constant<GemvInput, GemvInput::kPlain>{});
              break;
            case GemvInput::kRmsNorm:
              run(std::integral_constant<GemvInput, GemvInput::kRmsNorm>{});
              break;
            case GemvInput::kSiluMul:
              run(std::integral_constant<GemvInput, GemvInput::kSiluMul>{});
              break;
          }
          std::vector<double> want(y.size());
          double largest = 1;
          for (int r = 0; r < m; ++r) {
            const float* xr = x.data() + r * x_width;
            std::vector<double> in(static_cast<size_t>(k));
            double squares = 0;
            for (int64_t i = 0; i < k; ++i) {
              const auto iu = static_cast<size_t>(i);
              in[iu] = xr[i];
              if (input == GemvInput::kSiluMul)
                in[iu] = in[iu] / (1 + std::exp(-in[iu])) * xr[k + i];
              squares += in[iu] * in[iu];
            }
            if (input == GemvInput::kRmsNorm) {
              const double scale = 1 / std::sqrt(squares / static_cast<double>(k) + eps);
              for (int64_t i = 0; i < k; ++i)
                in[static_cast<size_t>(i)] *= scale * norm[static_cast<size_t>(i)];
            }
            for (int64_t o = 0; o < n; ++o) {
              double sum = 0;
              for (int64_t i = 0; i < k; ++i)
                sum += in[static_cast<size_t>(i)] * w[static_cast<size_t>(o * k + i)];
              if (extras)
                sum += bias[static_cast<size_t>(o)] + residual[static_cast<size_t>(r * n + o)];
              want[static_cast<size_t>(r * n + o)] = sum;
              largest = std::max(largest, std::fabs(sum));
            }
          }
          CHECK(Worst(y, want) <= 1e-5 * largest);
        }
      }
    }
  }
}

TEST_CASE("CUDA int8 GEMV and dequantization, emulated on the CPU, equal references",
          "[kernels][cuda]") {
  std::mt19937 rng(13);
  // 144 vectors of 16 weights a row: one full round of 32 lanes x 4 loads,
  // then a round with 16 vectors.
  const int64_t n = 13, k = 2304;
  std::uniform_int_distribution<int> level(-127, 127);
  std::vector<int8_t> w(static_cast<size_t>(n * k));
  for (int8_t& v : w)
    v = static_cast<int8_t>(level(rng));
  std::vector<float> scale = Random(static_cast<size_t>(n), rng);
  for (float& v : scale)
    v = std::fabs(v) * 0.01f;
  const std::vector<float> bias = Random(static_cast<size_t>(n), rng);
  for (const int m : {1, 3, 16}) {
    const std::vector<float> x = Random(static_cast<size_t>(m * k), rng);
    const std::vector<float> residual = Random(static_cast<size_t>(m * n), rng);
    for (const bool extras : {false, true}) {
      INFO("rows " << m << (extras ? ", bias and residual" : ""));
      std::vector<float> y(static_cast<size_t>(m * n), NAN);
      const float* b = extras ? bias.data() : nullptr;
      const float* res = extras ? residual.data() : nullptr;
      const auto blocks = static_cast<unsigned>((n + kWarps - 1) / kWarps);
      emulation::Launch({blocks, 1, 1}, 32 * kWarps, 0, [&] {
        if (m == 1) {
          GemvInt8Kernel<float, 1>(x.data(), w.data(), scale.data(), b, res, y.data(), n, k, m);
        } else if (m <= 4) {
          GemvInt8Kernel<float, 4>(x.data(), w.data(), scale.data(), b, res, y.data(), n, k, m);
        } else {
          GemvInt8Kernel<float, 16>(x.data(), w.data(), scale.data(), b, res, y.data(), n, k, m);
        }
      });
      std::vector<double> want(y.size());
      double largest = 1;
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t o = 0; o < n; ++o) {
          double sum = 0;
          for (int64_t i = 0; i < k; ++i)
            sum += double{x[static_cast<size_t>(r * k + i)]} * w[static_cast<size_t>(o * k + i)];
          sum *= scale[static_cast<size_t>(o)];
          if (extras)
            sum += bias[static_cast<size_t>(o)] + residual[static_cast<size_t>(r * n + o)];
          want[static_cast<size_t>(r * n + o)] = sum;
          largest = std::max(largest, std::fabs(sum));
        }
      }
      CHECK(Worst(y, want) <= 1e-5 * largest);
    }
  }
  std::vector<float> dense(static_cast<size_t>(n * k), NAN);
  emulation::Launch({8, 1, 1}, 256, 0, [&] {
    DequantizeInt8Kernel<float>(w.data(), scale.data(), dense.data(), n, k);
  });
  std::vector<double> want(dense.size());
  for (size_t i = 0; i < want.size(); ++i)
    want[i] = static_cast<float>(w[i]) * scale[i / static_cast<size_t>(k)];
  CHECK(Worst(dense, want) == 0);
}

}  // namespace
}  // namespace medq::engine::cuda
