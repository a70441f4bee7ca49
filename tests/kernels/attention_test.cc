// CpuCachedAttention (the CPU decode step's attention over the KV cache)
// against a double-precision softmax(q · kᵀ / √d) · v computed here, on every
// kernel table: head sizes at and between the vector kernels' steps, grouped
// query heads, and attended ranges that start past the cache's first row.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "daemon/engine/kernels/cpu_attention.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "tests/kernels/kernel_tables.h"
#include "tests/support/skip.h"

namespace medq::engine {
namespace {

struct Case {
  int64_t heads, kv_heads, head_dim, begin, end;
};

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist;
  std::vector<float> v(n);
  for (float& x : v)
    x = dist(rng);
  return v;
}

// out[h] = Σ_s softmax_s(q_h · k_s / √d) v_s in double, with kv head
// h / (heads / kv_heads).
std::vector<double> Reference(const kernels::CachedAttention& a) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads;
  std::vector<double> out(static_cast<size_t>(a.heads * d), 0.0);
  for (int64_t h = 0; h < a.heads; ++h) {
    const int64_t g = h / group;
    std::vector<double> p;
    double max = -INFINITY;
    for (int64_t s = a.begin; s < a.end; ++s) {
      double dot = 0;
      for (int64_t i = 0; i < d; ++i)
        dot += double{a.q[h * d + i]} * a.keys[(g * a.capacity + s) * d + i];
      p.push_back(dot / std::sqrt(static_cast<double>(d)));
      max = std::max(max, p.back());
    }
    double sum = 0;
    for (double& x : p)
      sum += (x = std::exp(x - max));
    for (int64_t s = a.begin; s < a.end; ++s) {
      const double w = p[static_cast<size_t>(s - a.begin)] / sum;
      for (int64_t i = 0; i < d; ++i)
        out[static_cast<size_t>(h * d + i)] += w * a.values[(g * a.capacity + s) * d + i];
    }
  }
  return out;
}

void CheckAgainstReference(Tables tables) {
  KernelMode mode(tables);
  MEDQ_SKIP_UNLESS_TABLE(tables);
  const std::string kernels = ActiveKernelsName();
  const int64_t capacity = 320;
  const std::vector<Case> cases = {
      {9, 3, 64, 0, 1},      {9, 3, 64, 0, 200},  {14, 2, 64, 17, 320}, {4, 4, 128, 5, 260},
      {2, 1, 80, 0, 33},     {3, 3, 72, 1, 9},    {2, 2, 5, 0, 40},     {1, 1, 8, 0, 320},
      {8, 2, 136, 100, 101}, {6, 2, 200, 0, 150},
  };
  std::mt19937 rng(11);
  for (const Case& c : cases) {
    INFO(kernels << " heads " << c.heads << "/" << c.kv_heads << " d " << c.head_dim << " ["
                 << c.begin << ", " << c.end << ")");
    const size_t cache = static_cast<size_t>(c.kv_heads * capacity * c.head_dim);
    const std::vector<float> q = Random(static_cast<size_t>(c.heads * c.head_dim), rng);
    const std::vector<float> keys = Random(cache, rng), values = Random(cache, rng);
    std::vector<float> out(q.size(), NAN);
    kernels::CachedAttention a;
    a.q = q.data();
    a.keys = keys.data();
    a.values = values.data();
    a.heads = c.heads;
    a.kv_heads = c.kv_heads;
    a.capacity = capacity;
    a.head_dim = c.head_dim;
    a.begin = c.begin;
    a.end = c.end;
    a.out = out.data();
    kernels::CpuCachedAttention({&a, 1});
    const std::vector<double> ref = Reference(a);
    for (size_t i = 0; i < out.size(); ++i) {
      INFO("output " << i);
      REQUIRE(std::abs(out[i] - ref[i]) <= 2e-5 * (1 + std::abs(ref[i])));
    }
    // Heads split over threads or not: the same bits.
    std::vector<float> one_thread(q.size(), NAN);
    a.out = one_thread.data();
    kernels::SetKernelThreads(1);
    kernels::CpuCachedAttention({&a, 1});
    kernels::SetKernelThreads(0);
    REQUIRE(one_thread == out);
  }
}

// Several sequences' attention in one call, short contexts (on the calling
// thread) and long ones (heads shared over threads): each row bitwise what a
// call with that row alone gives it.
TEST_CASE("CpuCachedAttention gives each of several rows its result alone", "[attention]") {
  const int64_t capacity = 300;
  std::mt19937 rng(3);
  for (const std::vector<int64_t>& ends :
       {std::vector<int64_t>{1, 5, 17, 9}, std::vector<int64_t>{300, 40, 1, 250, 120}}) {
    INFO("contexts " << ends.size() << " ending at " << ends[0]);
    const int64_t heads = 9, kv_heads = 3, d = 64;
    const size_t cache = static_cast<size_t>(kv_heads * capacity * d);
    std::vector<std::vector<float>> q, keys, values, alone, together;
    std::vector<kernels::CachedAttention> rows;
    for (size_t i = 0; i < ends.size(); ++i) {
      q.push_back(Random(static_cast<size_t>(heads * d), rng));
      keys.push_back(Random(cache, rng));
      values.push_back(Random(cache, rng));
      alone.emplace_back(static_cast<size_t>(heads * d), NAN);
      together.emplace_back(static_cast<size_t>(heads * d), NAN);
    }
    for (size_t i = 0; i < ends.size(); ++i) {
      kernels::CachedAttention a;
      a.q = q[i].data();
      a.keys = keys[i].data();
      a.values = values[i].data();
      a.heads = heads;
      a.kv_heads = kv_heads;
      a.capacity = capacity;
      a.head_dim = d;
      a.begin = 0;
      a.end = ends[i];
      a.out = alone[i].data();
      kernels::CpuCachedAttention({&a, 1});
      a.out = together[i].data();
      rows.push_back(a);
    }
    kernels::CpuCachedAttention(rows);
    for (size_t i = 0; i < ends.size(); ++i) {
      INFO("row " << i);
      REQUIRE(together[i] == alone[i]);
    }
  }
}

TEST_CASE("CpuCachedAttention matches softmax(q k) v, AVX-512VL", "[attention]") {
  CheckAgainstReference(Tables::kAvx512);
}
TEST_CASE("CpuCachedAttention matches softmax(q k) v, AVX2", "[attention]") {
  CheckAgainstReference(Tables::kAvx2);
}
TEST_CASE("CpuCachedAttention matches softmax(q k) v, scalar", "[attention]") {
  CheckAgainstReference(Tables::kScalar);
}

}  // namespace
}  // namespace medq::engine
