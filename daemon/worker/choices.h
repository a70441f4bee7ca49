// The choices of one generation (params.n > 1): each decodes as a Generation
// of its own, side by side in its model's batch, choice i seeded with seed +
// i (generation.h). Their token events go to the client with their index,
// and one done, once every choice has ended, carries each choice's end
// (GenerateDone::choices). Worker thread only.
#pragma once

#include <vector>

#include "common/messages.h"
#include "common/result.h"
#include "daemon/worker/generation.h"

namespace medq::daemon {

// n sinks, choice i's at i, that feed `sink`: tokens with index i, the first
// `admitted`, every report, and one `done` after the last choice's: the first
// error by index if any choice failed, else ChoiceDones combined.
std::vector<GenerationSink> SplitSink(GenerationSink sink, int n);

// The done fields of a generation of n choices from each one's (index i at
// i): choice 0's fields, every choice's end in `choices`, usage summed and
// the longest decode.
GenerateDone CombineChoices(std::vector<GenerateDone> parts);

}  // namespace medq::daemon
