// `medq generate`: sends a generate request and streams its events.
#pragma once

#include "cli/commands.h"

namespace medq::cli {

Action SetUpGenerate(CLI::App& sub, const GlobalOptions& global);
// `medq submit`: the same flags; queues the generation and prints its job id.
Action SetUpSubmit(CLI::App& sub, const GlobalOptions& global);

}  // namespace medq::cli
