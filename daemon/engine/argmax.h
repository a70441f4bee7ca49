// The greedy pick of a logits row.
#pragma once

#include <ATen/ATen.h>

namespace medq::engine {

// What row.argmax().item<int64_t>() gives for a 1-D tensor: the first index
// of its largest value, or of its first NaN (which LibTorch ranks above every
// number). A contiguous CPU float32 row, the greedy case of every CPU decode
// step, is scanned here: LibTorch 1.13's argmax takes about 63 us for a
// 49152-id vocabulary (a dependent compare an element), this scan a few.
// Other rows go to LibTorch. Precondition: row.numel() > 0.
int64_t Argmax(const at::Tensor& row);

}  // namespace medq::engine
