// `medq status`, `medq result` and `medq forget`: a recorded job, by id, for
// clients that do not hold a connection (`medq submit`, in generate.cc) or
// lost one (a daemon restart: `medq result JOB --wait` reattaches).
#pragma once

#include "cli/commands.h"

namespace medq::cli {

Action SetUpStatus(CLI::App& sub, const GlobalOptions& global);
Action SetUpResult(CLI::App& sub, const GlobalOptions& global);
Action SetUpForget(CLI::App& sub, const GlobalOptions& global);

}  // namespace medq::cli
