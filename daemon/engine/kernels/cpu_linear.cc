#include "daemon/engine/kernels/cpu_linear.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>

#include "daemon/engine/kernels/aligned_vector.h"
#include "daemon/engine/kernels/cpu_features.h"
#include "daemon/engine/kernels/dense_kernels.h"
#include "daemon/engine/kernels/work_sharing.h"

namespace medq::engine::kernels {
namespace {

// Rows are handed out in chunks of at least this many weight bytes: claiming
// a chunk costs an atomic add on a line both cores write (~0.2 µs), reading
// 64 KiB about 3 µs; matrices smaller than one chunk stay on the calling
// thread.
constexpr int64_t kMinChunkBytes = 64 * 1024;

// Larger matrices are cut into this many chunks per thread: long runs of
// rows keep the hardware prefetcher streaming, and a second chunk evens out a
// thread that starts late. On 2 cores (kernels_bench, 896x4864 bf16), 38 KiB
// chunks read 21 GB/s, 16 chunks 29 GB/s, 2 chunks 40 GB/s; decode of the
// SmolLM-135M shape was fastest with 2 per thread.
constexpr int64_t kChunksPerThread = 2;

// Threads get whole blocks of kRowBlock output rows, so that the kernels
// see the same row blocks (and round the same way) whatever the thread count.
constexpr int64_t kRowBlock = kBf16RowBlock;

std::atomic<bool> g_use_openmp{false};
std::atomic<int> g_threads{0};  // 0: one per core

// One per core, asked of the system once: std::thread::hardware_concurrency()
// reads /sys on every call (~9 µs here), and KernelThreads() runs per product.
int CoreCount() {
  static const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return cores;
}

// Splits output rows [0, out) into chunks of whole blocks of block_rows rows
// (kRowBlock, or a packed tile), each reading at least kMinChunkBytes of
// weights, runs fn(row_begin, row_end) for each chunk on KernelThreads()
// threads (the OpenMP split: at::get_num_threads()), and returns when all
// are done. row_begin is a multiple of block_rows; row_end too, or out.
template <typename Fn>
void ParallelOverRows(int64_t out, int64_t in, size_t element_size, const Fn& fn,
                      int64_t block_rows = kRowBlock) {
  const int64_t block_bytes =
      std::max<int64_t>(1, block_rows * in * static_cast<int64_t>(element_size));
  const int64_t blocks = (out + block_rows - 1) / block_rows;
  const int threads = KernelThreads();
  const int64_t chunk_bytes =
      std::max(kMinChunkBytes, blocks * block_bytes / (kChunksPerThread * threads));
  const int64_t grain = (chunk_bytes + block_bytes - 1) / block_bytes;
  if (g_use_openmp.load(std::memory_order_relaxed)) {
    at::parallel_for(0, blocks, grain, [&](int64_t begin, int64_t end) {
      fn(begin * block_rows, std::min(out, end * block_rows));
    });
    return;
  }
  const int64_t chunks = (blocks + grain - 1) / grain;
  ShareWork(chunks, threads - 1, [&](int64_t chunk) {
    const int64_t begin = chunk * grain * block_rows;
    fn(begin, std::min(out, begin + grain * block_rows));
  });
}

std::vector<int64_t> OutputSizes(const torch::Tensor& x, int64_t out) {
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end());
  sizes.back() = out;
  return sizes;
}

// Bias as a contiguous float32 buffer, or undefined.
torch::Tensor FloatBias(const torch::Tensor& bias) {
  if (!bias.defined()) return bias;
  if (bias.scalar_type() == torch::kFloat && bias.is_contiguous()) return bias;  // no dispatch
  return bias.to(torch::kFloat).contiguous();
}

// The m rows x [m, in] laid out as the table's bf16 kernels read them, in a
// buffer of the calling thread's, grown and never shrunk: a decode step makes
// several products a layer, and allocating one per product would put the
// allocator on the per-token path. Valid until the thread's next call.
const float* PreparedBf16Rows(const DenseKernels& k, const float* x, int64_t m, int64_t in) {
  thread_local AlignedFloats prepared;
  if (prepared.size() < static_cast<size_t>(m * in)) prepared.resize(static_cast<size_t>(m * in));
  k.prepare_bf16_rows(x, m, in, prepared.data());
  return prepared.data();
}

// Up to this many bytes, a product's prepared x rows live in a buffer of the
// calling thread's, grown and kept: a decode step makes several products a
// layer, and an allocation each would put the allocator on the per-token
// path (16 rows of a 7B model's widest input, 14,336, take 0.27 MiB). A
// prefill chunk's rows (up to tens of megabytes for a wide model) get a
// tensor of the product's own instead, so that they go back to LibTorch's
// allocator (and host_pool.h's release after the request) when the product
// ends rather than stay with the worker thread for the daemon's life.
constexpr size_t kKeptScratchBytes = 1 << 20;

// Three arrays of the given byte sizes, each 64-byte aligned, in the calling
// thread's kept buffer or in `owned`; valid until the thread's next call, or
// while `owned` lives.
std::array<std::byte*, 3> Scratch(const std::array<size_t, 3>& bytes, torch::Tensor& owned) {
  constexpr size_t kAlign = kCacheLineBytes;
  size_t total = 0;
  std::array<size_t, 3> at{};
  for (size_t i = 0; i < bytes.size(); ++i) {
    at[i] = total;
    total += (bytes[i] + kAlign - 1) / kAlign * kAlign;
  }
  std::byte* base;
  if (total <= kKeptScratchBytes) {
    thread_local AlignedFloats kept;  // 64-byte aligned (aligned_vector.h)
    if (kept.size() * sizeof(float) < total) kept.resize(total / sizeof(float));
    base = reinterpret_cast<std::byte*>(kept.data());
  } else {
    owned = torch::empty({static_cast<int64_t>(total + kAlign)}, torch::kByte);
    const auto address = reinterpret_cast<uintptr_t>(owned.data_ptr<uint8_t>());
    base = reinterpret_cast<std::byte*>((address + kAlign - 1) / kAlign * kAlign);
  }
  return {base + at[0], base + at[1], base + at[2]};
}

// x rounded to int8 blocks and laid out for the int8 and int4 products
// (dense_kernels.h, PrepareI8Rows and PrepareI4Rows), in Scratch: once a
// product.
I8Rows PreparedI8Rows(const DenseKernels& k, const float* x, int64_t m, int64_t in,
                      torch::Tensor& owned) {
  const auto n = static_cast<size_t>(m);
  const auto buffers = Scratch({n * I8RowBytes(in), n * I8RowLanes(in) * sizeof(float),
                                n * I8RowLanes(in) * sizeof(int32_t)},
                               owned);
  auto* q = reinterpret_cast<int8_t*>(buffers[0]);
  auto* lane_scale = reinterpret_cast<float*>(buffers[1]);
  auto* offset = reinterpret_cast<int32_t*>(buffers[2]);
  PrepareI8Rows(k.quantize_x_span, x, m, in, q, lane_scale, offset);
  return {q, lane_scale, offset, in};
}

I4Rows PreparedI4Rows(const DenseKernels& k, const float* x, int64_t m, int64_t in, int64_t group,
                      torch::Tensor& owned) {
  const auto n = static_cast<size_t>(m);
  const auto buffers = Scratch({n * I4RowBytes(in), n * I4RowLaneScales(in) * sizeof(float),
                                n * I4RowGroupSums(in, group) * sizeof(float)},
                               owned);
  auto* q = reinterpret_cast<int8_t*>(buffers[0]);
  auto* lane_scale = reinterpret_cast<float*>(buffers[1]);
  auto* group_sum = reinterpret_cast<float*>(buffers[2]);
  PrepareI4Rows(k.quantize_x_block, x, m, in, group, q, lane_scale, group_sum);
  return {q, lane_scale, group_sum, in, group};
}

// x rows [i0, i0 + rows) of prepared rows, as the kernels take a whole set.
I8Rows RowsFrom(const I8Rows& x, int64_t i0) {
  return {x.q + i0 * I8RowBytes(x.in), x.lane_scale + i0 * I8RowLanes(x.in),
          x.offset + i0 * I8RowLanes(x.in), x.in};
}
I4Rows RowsFrom(const I4Rows& x, int64_t i0) {
  return {x.q + i0 * I4RowBytes(x.in), x.lane_scale + i0 * I4RowLaneScales(x.in),
          x.group_sum + i0 * I4RowGroupSums(x.in, x.group), x.in, x.group};
}

// The integer products of many x rows (prefill's) are cut into blocks: x rows
// in blocks of about kXBlockBytes of prepared x (whole tiles of four rows, the
// kernels' tile), which stay in L1 while a run of weight rows passes under
// them, and weight rows in runs of about kWeightRunBytes, which stay in L2
// while every block of x passes over them. Without the blocks every weight
// row met all of x from L3 (512 prefill rows of a 4864-wide down_proj are
// 2.5 MB); with them a 512-row product ran at 0.95 to 1.6 times the tiled
// GEMM it replaced (bench/engine/README.md, "Integer products for prefill").
// Each (x row, weight row) product is the kernels' own, so the blocks change
// no bit of the result.
constexpr int64_t kXBlockBytes = 20 * 1024;
constexpr int64_t kWeightRunBytes = 128 * 1024;

// Runs kernel(x_begin, x_rows, row_begin, row_end) over the product of m
// prepared x rows of x_row_bytes and the weight rows [0, out) of
// weight_row_bytes, in the blocks above, on KernelThreads() threads.
template <typename Kernel>
void ParallelOverBlocks(int64_t out, int64_t weight_row_bytes, int64_t m, int64_t x_row_bytes,
                        const Kernel& kernel) {
  const int64_t x_block = std::max<int64_t>(4, kXBlockBytes / x_row_bytes / 4 * 4);
  if (x_block >= m) {
    // All of x stays in L1 as it is: the split by the weight bytes alone.
    ParallelOverRows(out, weight_row_bytes, 1,
                     [&](int64_t begin, int64_t end) { kernel(0, m, begin, end); });
    return;
  }
  const int64_t run =
      std::max<int64_t>(kRowBlock, kWeightRunBytes / weight_row_bytes / kRowBlock * kRowBlock);
  // Chunks by the work, a weight row's bytes once for each x row, so that
  // even a small matrix (k_proj's) is shared by the threads.
  ParallelOverRows(out, weight_row_bytes * m, 1, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; r += run) {
      for (int64_t i = 0; i < m; i += x_block)
        kernel(i, std::min(x_block, m - i), r, std::min(end, r + run));
    }
  });
}

}  // namespace

void SetKernelThreads(int threads) {
  g_threads.store(std::max(0, threads), std::memory_order_relaxed);
}

int KernelThreads() {
  const int threads = g_threads.load(std::memory_order_relaxed);
  return threads > 0 ? threads : CoreCount();
}

void Bf16ToFloat(const uint16_t* src, int64_t n, float* dst) {
  ActiveKernels().bf16_to_f32(src, n, dst);
}

void SetOpenMpRowSplit(bool enabled) {
  g_use_openmp.store(enabled, std::memory_order_relaxed);
}

void MatVecInto(const torch::Tensor& weight, const float* x, const float* bias, float* y,
                const float* scale) {
  const int64_t out = weight.size(0);
  const int64_t in = weight.size(1);
  const DenseKernels& k = ActiveKernels();
  if (weight.scalar_type() == torch::kChar) {
    const int8_t* wp = weight.data_ptr<int8_t>();
    torch::Tensor owned;
    const I8Rows rows = PreparedI8Rows(k, x, 1, in, owned);
    ParallelOverRows(out, in, sizeof(int8_t), [&](int64_t begin, int64_t end) {
      k.matvec_i8(wp, scale, rows, bias, y, begin, end);
    });
  } else if (weight.scalar_type() == torch::kFloat) {
    const float* wp = weight.data_ptr<float>();
    ParallelOverRows(out, in, sizeof(float), [&](int64_t begin, int64_t end) {
      k.matvec_f32(wp, in, x, bias, y, begin, end);
    });
  } else {
    const auto* wp = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
    const float* xp = PreparedBf16Rows(k, x, 1, in);
    ParallelOverRows(out, in, sizeof(uint16_t), [&](int64_t begin, int64_t end) {
      k.matvec_bf16(wp, in, xp, bias, y, begin, end);
    });
  }
}

void MatRowsInto(const torch::Tensor& weight, const float* x, int64_t m, const float* bias,
                 float* y, const float* scale) {
  // One row: the matvec itself. A tile computes each row exactly as the matvec
  // does, so tiling a single row would gain nothing.
  if (m == 1) {
    MatVecInto(weight, x, bias, y, scale);
    return;
  }
  const int64_t out = weight.size(0);
  const int64_t in = weight.size(1);
  const DenseKernels& k = ActiveKernels();
  // The weight bytes decide the split, as in MatVecInto: the rows of x are
  // reused from cache, so the chunks stay as long as for one row. The int8
  // rows, once more than one block of x, split by the work instead
  // (ParallelOverBlocks).
  if (weight.scalar_type() == torch::kChar) {
    const int8_t* wp = weight.data_ptr<int8_t>();
    torch::Tensor owned;
    const I8Rows rows = PreparedI8Rows(k, x, m, in, owned);
    ParallelOverBlocks(
        out, in, m, I8RowBytes(in), [&](int64_t i, int64_t rows_here, int64_t begin, int64_t end) {
          k.matrows_i8(wp, scale, RowsFrom(rows, i), out, rows_here, bias, y + i * out, begin, end);
        });
  } else if (weight.scalar_type() == torch::kFloat) {
    const float* wp = weight.data_ptr<float>();
    ParallelOverRows(out, in, sizeof(float), [&](int64_t begin, int64_t end) {
      k.matrows_f32(wp, in, out, x, m, bias, y, begin, end);
    });
  } else {
    const auto* wp = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
    const float* xp = PreparedBf16Rows(k, x, m, in);
    ParallelOverRows(out, in, sizeof(uint16_t), [&](int64_t begin, int64_t end) {
      k.matrows_bf16(wp, in, out, xp, m, bias, y, begin, end);
    });
  }
}

int64_t PackedBf16Elements(int64_t out, int64_t in) {
  return PackedTiles(out) * kPackedTileRows * in;
}

void PackBf16Tiles(const uint16_t* w, int64_t out, int64_t in, uint16_t* packed) {
  for (int64_t t = 0; t < PackedTiles(out); ++t) {
    uint16_t* tile = packed + t * in * kPackedTileRows;
    for (int64_t j = 0; j < kPackedTileRows; ++j) {
      const int64_t r = t * kPackedTileRows + j;
      const int64_t position = PackedTilePosition(j);
      for (int64_t k = 0; k < in; ++k)
        tile[k * kPackedTileRows + position] = r < out ? w[r * in + k] : 0;
    }
  }
}

void MatRowsPackedInto(const uint16_t* packed, int64_t out, int64_t in, const float* x, int64_t m,
                       const float* bias, float* y) {
  const DenseKernels& k = ActiveKernels();
  ParallelOverRows(
      out, in, sizeof(uint16_t),
      [&](int64_t begin, int64_t end) {
        k.packed_bf16(packed, in, out, x, m, bias, y, begin / kPackedTileRows, PackedTiles(end));
      },
      kPackedTileRows);
}

void WeightRowsInto(const torch::Tensor& weight, const torch::Tensor& scale, const uint16_t* packed,
                    const float* x, int64_t m, const float* bias, float* y) {
  if (weight.scalar_type() == torch::kByte) return MatRowsInt4Into(weight, scale, x, m, bias, y);
  if (packed != nullptr) {
    return MatRowsPackedInto(packed, weight.size(0), weight.size(1), x, m, bias, y);
  }
  MatRowsInto(weight, x, m, bias, y, scale.defined() ? scale.data_ptr<float>() : nullptr);
}

torch::Tensor CpuMatVec(const torch::Tensor& x, const torch::Tensor& weight,
                        const torch::Tensor& bias) {
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor b = FloatBias(bias);
  torch::Tensor y = torch::empty(OutputSizes(x, weight.size(0)), x.options());
  MatVecInto(weight, xc.data_ptr<float>(), b.defined() ? b.data_ptr<float>() : nullptr,
             y.data_ptr<float>());
  return y;
}

torch::Tensor CpuMatMulBf16(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias) {
  const int64_t out = weight.size(0);
  const int64_t in = weight.size(1);
  const int64_t m = x.numel() / in;
  const torch::Tensor xc = x.reshape({m, in}).contiguous();
  const torch::Tensor b = FloatBias(bias);
  torch::Tensor y = torch::empty(OutputSizes(x, out), x.options());
  const float* xp = xc.data_ptr<float>();
  const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
  float* yp = y.data_ptr<float>();
  const auto* wp = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  const DenseKernels& k = ActiveKernels();
  ParallelOverRows(out, in, sizeof(uint16_t), [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(static_cast<size_t>(kBf16RowBlock * in));
    k.matmul_bf16(wp, in, out, xp, m, bp, yp, begin, end, scratch.data());
  });
  return y;
}

torch::Tensor CpuTiledGemmBf16(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias) {
  const int64_t out = weight.size(0);
  const int64_t in = weight.size(1);
  const auto* wp = reinterpret_cast<const uint16_t*>(weight.data_ptr<at::BFloat16>());
  const DenseKernels& k = ActiveKernels();
  const int64_t m = x.numel() / in;
  const torch::Tensor xc = x.reshape({m, in}).contiguous();
  const torch::Tensor b = FloatBias(bias);
  const int64_t tile_rows =
      std::min(out, std::max<int64_t>(kGemmTileMinRows,
                                      kGemmTileBytes / (in * static_cast<int64_t>(sizeof(float)))));
  torch::Tensor y = torch::empty({m, out}, x.options());
  float* yp = y.data_ptr<float>();
  const float* bp = b.defined() ? b.data_ptr<float>() : nullptr;
  torch::Tensor tile = torch::empty({tile_rows, in}, x.options());
  for (int64_t r0 = 0; r0 < out; r0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, out - r0);
    // Converted with the own kernel and row split: Tensor::copy_ would open
    // an OpenMP region per tile, which stalls on a busy machine.
    torch::Tensor t = tile.narrow(0, 0, rows);
    float* tp = t.data_ptr<float>();
    ParallelOverRows(rows, in, sizeof(uint16_t), [&](int64_t begin, int64_t end) {
      k.bf16_to_f32(wp + (r0 + begin) * in, (end - begin) * in, tp + begin * in);
    });
    // GEMM into a fresh contiguous block, then rows copied (bias added) by
    // hand: addmm and Tensor::copy_ would open OpenMP regions of their own.
    const torch::Tensor part = at::mm(xc, t.t());
    const float* pp = part.data_ptr<float>();
    for (int64_t i = 0; i < m; ++i) {
      float* dst = yp + i * out + r0;
      const float* src = pp + i * rows;
      if (bp != nullptr) {
        for (int64_t j = 0; j < rows; ++j)
          dst[j] = src[j] + bp[r0 + j];
      } else {
        std::memcpy(dst, src, static_cast<size_t>(rows) * sizeof(float));
      }
    }
  }
  return y.view(OutputSizes(x, out));
}

torch::Tensor CpuMatRowsInt8(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& scale, const torch::Tensor& bias) {
  const int64_t in = weight.size(1);
  const int64_t m = x.numel() / in;
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor b = FloatBias(bias);
  torch::Tensor y = torch::empty(OutputSizes(x, weight.size(0)), x.options());
  MatRowsInto(weight, xc.data_ptr<float>(), m, b.defined() ? b.data_ptr<float>() : nullptr,
              y.data_ptr<float>(), scale.data_ptr<float>());
  return y;
}

namespace {

// The int4 matrix's raw buffers and widths.
struct Int4Matrix {
  const uint8_t* w;
  const uint16_t* params;
  int64_t out, in, group;
};
Int4Matrix Int4Of(const torch::Tensor& packed, const torch::Tensor& params) {
  const int64_t in = 2 * packed.size(1);
  return {packed.data_ptr<uint8_t>(),
          reinterpret_cast<const uint16_t*>(params.data_ptr<at::BFloat16>()), packed.size(0), in,
          in / params.size(1)};
}

}  // namespace

void MatRowsInt4Into(const torch::Tensor& packed, const torch::Tensor& params, const float* x,
                     int64_t m, const float* bias, float* y) {
  const Int4Matrix q = Int4Of(packed, params);
  const DenseKernels& k = ActiveKernels();
  torch::Tensor owned;
  const I4Rows rows = PreparedI4Rows(k, x, m, q.in, q.group, owned);
  // Weight rows of in / 2 bytes, half a byte a weight. A block of one x row
  // (m = 1, or a last block) takes the one-row kernel: bitwise the same.
  ParallelOverBlocks(q.out, q.in / 2, m, I4RowBytes(q.in),
                     [&](int64_t i, int64_t rows_here, int64_t begin, int64_t end) {
                       if (rows_here == 1) {
                         k.matvec_i4(q.w, q.params, RowsFrom(rows, i), bias, y + i * q.out, begin,
                                     end);
                       } else {
                         k.matrows_i4(q.w, q.params, RowsFrom(rows, i), q.out, rows_here, bias,
                                      y + i * q.out, begin, end);
                       }
                     });
}

torch::Tensor CpuMatRowsInt4(const torch::Tensor& x, const torch::Tensor& packed,
                             const torch::Tensor& params, const torch::Tensor& bias) {
  const int64_t in = 2 * packed.size(1);
  const torch::Tensor xc = x.contiguous();
  const torch::Tensor b = FloatBias(bias);
  torch::Tensor y = torch::empty(OutputSizes(x, packed.size(0)), x.options());
  MatRowsInt4Into(packed, params, xc.data_ptr<float>(), x.numel() / in,
                  b.defined() ? b.data_ptr<float>() : nullptr, y.data_ptr<float>());
  return y;
}

torch::Tensor DequantizeInt4(const torch::Tensor& packed, const torch::Tensor& params) {
  const Int4Matrix q = Int4Of(packed, params);
  torch::Tensor w = torch::empty({q.out, q.in}, torch::kFloat);
  ActiveKernels().dequantize_i4(q.w, q.params, q.out, q.in, q.group, w.data_ptr<float>());
  return w;
}

}  // namespace medq::engine::kernels
