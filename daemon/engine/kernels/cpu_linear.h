// The CPU fast paths behind Linear(), callable one by one so that tests and
// kernels_bench can run each path on any shape. The engine calls Linear().
//
// Common preconditions (what SelectLinearPath() checks before choosing one of
// these; violating them is undefined behaviour, not an error):
//   x:      float32, CPU, [..., in] with at least one row; any strides.
//   weight: [out, in], contiguous, CPU, in > 0 and out > 0; dtype as named.
//   bias:   undefined, or [out] float32/bf16 on CPU; any strides.
// Each returns a new float32 tensor of shape [..., out] holding
// x · weightᵀ + bias, accumulated in float32, and may use KernelThreads()
// threads. Thread-safety: pure functions.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace medq::engine::kernels {

// Exactly one row of x (x.numel() == in), float32 or bf16 weights: the
// matrix-vector kernel of ActiveKernels(), output rows split across
// KernelThreads() threads.
torch::Tensor CpuMatVec(const torch::Tensor& x, const torch::Tensor& weight,
                        const torch::Tensor& bias);

// The same on raw buffers, for callers that keep their activations outside
// tensors (the CPU decode step): y[0, out) = weight · x + bias, x float32
// [in], bias nullptr or float32 [out]; weight as above, float32 or bf16.
// No allocation and no LibTorch dispatch.
// int8 weights (torch::kChar, symmetric, one scale a row: DenseKernels'
// matvec_i8) take `scale`, float32 [out], the row scales, and round x to
// int8 in blocks of 32 first (PrepareI8Rows, into a buffer this thread keeps);
// other dtypes ignore `scale`.
void MatVecInto(const torch::Tensor& weight, const float* x, const float* bias, float* y,
                const float* scale = nullptr);

// m rows on raw buffers, batch-invariant: y [m, out] = x [m, in] · weightᵀ +
// bias, where row i of y is bitwise what MatVecInto(weight, x row i, bias)
// writes, whatever m and the other rows are (the same dot product in the
// same order, ActiveKernels().matrows_*), while each weight row is read from
// memory once for all m rows. For the batched CPU decode step, where a
// sequence's logits must not depend on its neighbours. m >= 1; buffers as
// MatVecInto's. No LibTorch dispatch; the bf16 path lays x out in a scratch
// buffer reused across calls on the same thread.
// int8 weights as MatVecInto's, with `scale` (ActiveKernels().matrows_i8).
void MatRowsInto(const torch::Tensor& weight, const float* x, int64_t m, const float* bias,
                 float* y, const float* scale = nullptr);

// bf16 weights packed in tiles of 16 rows, for the batched CPU decode step
// (the layout: DenseKernels::packed_bf16 in dense_kernels.h). Four x rows
// against a tile cost about what one does, where the row-major MatRowsInto
// pays for a vector load of x per multiply-add (packed_avx2.cc says how
// much). PackedBf16Elements: the uint16 elements the packed copy of an
// [out, in] matrix takes (out rounded up to 16 rows). PackBf16Tiles writes
// that copy of w [out, in] (raw bf16 bits, row-major) to `packed`.
int64_t PackedBf16Elements(int64_t out, int64_t in);
void PackBf16Tiles(const uint16_t* w, int64_t out, int64_t in, uint16_t* packed);

// y [m, out] = x [m, in] · wᵀ + bias over the packed copy of w [out, in]:
// row i of y bitwise the same whatever m and the other rows are (every
// product one fused multiply-add at a time, in k order), tiles split over
// KernelThreads() threads, each tile read once for all m rows. x float32 as
// it is, bias nullptr or float32 [out]. No allocation, no LibTorch dispatch.
void MatRowsPackedInto(const uint16_t* packed, int64_t out, int64_t in, const float* x, int64_t m,
                       const float* bias, float* y);

// bf16 weights, any number of rows: reads each block of weight rows once and
// applies it to every row of x (ActiveKernels().matmul_bf16).
torch::Tensor CpuMatMulBf16(const torch::Tensor& x, const torch::Tensor& weight,
                            const torch::Tensor& bias);

// bf16 weights, any number of rows: converts tiles of weight rows to float32
// (about kGemmTileBytes, and at least kGemmTileMinRows rows so that GEMM runs
// on a wide enough matrix) and multiplies each with BLAS GEMM. Peak extra
// memory: one tile, not a float32 copy of the weights.
torch::Tensor CpuTiledGemmBf16(const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias);

// int8 weights [out, in] (torch::kChar) with float32 row scales `scale`
// [out], contiguous: x · (weight · diag(scale))ᵀ + bias, any number of rows,
// with the batch-invariant int8 kernels (row i bitwise what MatVecInto gives
// it alone; x rounded to int8 blocks as MatVecInto rounds it). Many rows (a
// prefill chunk) go through the kernels in blocks of x rows and runs of
// weight rows that stay in cache (cpu_linear.cc, ParallelOverBlocks).
torch::Tensor CpuMatRowsInt8(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& scale, const torch::Tensor& bias);

// int4 weights (quantize.h in the engine; the layout: DenseKernels'
// matvec_i4 in dense_kernels.h): `packed` uint8 [out, in / 2] and `params`
// bf16 [out, in / group, 2] (each group's scale and minimum), both
// contiguous on the CPU; in is 2 · packed.size(1), the group in /
// params.size(1), a multiple of 32 dividing in.
// MatRowsInt4Into: y [m, out] = x [m, in] · wᵀ + bias on raw buffers as
// MatRowsInto, with x quantized to int8 in blocks of 32 first (PrepareI4Rows,
// dense_kernels.h: integer products, as llama.cpp's Q4 kernels), row i of y
// bitwise what it is for m = 1 (matvec_i4 for one row, matrows_i4 for
// several), rows split over KernelThreads() threads.
// CpuMatRowsInt4: the same on tensors, x [..., in] float32. Many rows go
// through the kernels in blocks, as CpuMatRowsInt8's.
// DequantizeInt4: the whole matrix as float32 [out, in], for the baseline
// path and for tests.
// PackInt4Row: one row of `in` codes (0..15, in weight order) written to dst
// as the in / 2 bytes of that layout (the engine's quantizer and checkpoint
// loaders pack with it). Int4CodeOrder: for each weight k of a row, the
// index 2 · byte + (1 for a high nibble) of its code among the row's bytes'
// nibbles laid side by side, low then high: how tensors unpack the layout.
void PackInt4Row(const uint8_t* codes, int64_t in, uint8_t* dst);
std::vector<int64_t> Int4CodeOrder(int64_t in);
void MatRowsInt4Into(const torch::Tensor& packed, const torch::Tensor& params, const float* x,
                     int64_t m, const float* bias, float* y);
torch::Tensor CpuMatRowsInt4(const torch::Tensor& x, const torch::Tensor& packed,
                             const torch::Tensor& params, const torch::Tensor& bias);
torch::Tensor DequantizeInt4(const torch::Tensor& packed, const torch::Tensor& params);

// m rows against any weight the batch-invariant row kernels above take,
// chosen by its dtype: int4 (torch::kByte, `scale` its group parameters:
// MatRowsInt4Into), bf16 through its packed copy `packed` where one is
// given (MatRowsPackedInto), else float32, bf16 or int8 (`scale` its row
// scales) by MatRowsInto. Row i of y is bitwise what it is for m = 1
// through the same call. The decode steps that must keep a row's logits
// independent of its neighbours (the CPU's, and the device loop's on the
// CPU) call this one function.
void WeightRowsInto(const torch::Tensor& weight, const torch::Tensor& scale, const uint16_t* packed,
                    const float* x, int64_t m, const float* bias, float* y);

// How many threads (the caller plus helpers) the own kernels split output
// rows over; threads <= 0 means one per core (the default). Independent of
// LibTorch's intra-op threads, which the engine keeps at 1: OpenMP's workers
// spin after every region and starve these kernels on a small machine.
// Process-wide; call it only while no Linear() call is running.
void SetKernelThreads(int threads);
int KernelThreads();

// dst[i] = float(src[i]) for i in [0, n): bf16 bit patterns to float32,
// exact, with the active kernel set.
void Bf16ToFloat(const uint16_t* src, int64_t n, float* dst);

// Benchmark and test switch for how the own kernels split output rows:
// false (the default) uses ShareWork (work_sharing.h) on KernelThreads()
// threads, which never waits for a thread that has not started; true uses
// at::parallel_for on at::get_num_threads() threads (an OpenMP region, whose
// barrier waits for every thread). Process-wide; flip it only while no
// Linear() call is running.
void SetOpenMpRowSplit(bool enabled);

inline constexpr int64_t kGemmTileBytes = 4 << 20;
inline constexpr int64_t kGemmTileMinRows = 128;

}  // namespace medq::engine::kernels
