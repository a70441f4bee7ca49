// How the embedding batcher picks the texts of its next forward pass. Pure
// logic, free of LibTorch and of the worker, so that it is tested alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace medq::daemon {

struct BatchLimits {
  int max_batch = 32;  // texts per forward pass
  // The most of a batch's token slots that may be padding (1 - real tokens /
  // (texts x longest)). A batch of one text never pads.
  double max_padding = 0.25;
};

// `lengths`: the token counts of the pending texts, oldest first. Returns the
// indices of the next batch, in ascending order: always the oldest text
// (so that no text waits behind an endless stream of better-fitting ones),
// then, while the batch has room, the text nearest in length to the batch's
// range, as long as the padding stays within the limit. Texts of similar
// length thus travel together and very different ones go in batches of their
// own. Empty only when `lengths` is.
std::vector<size_t> PlanBatch(const std::vector<int64_t>& lengths, const BatchLimits& limits);

// Padding fraction of a batch of these lengths (0 for an empty one).
double PaddingFraction(const std::vector<int64_t>& lengths);

}  // namespace medq::daemon
