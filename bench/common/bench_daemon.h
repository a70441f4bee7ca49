// Starting medqd for a benchmark, with the settings every benchmark shares.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace medq::bench {

// Spawns the medqd binary at `medqd` on `socket`, with a job store of its own
// beside the socket, named after it ("x.sock" -> "x.state": the default one
// may be in use, and two daemons of one benchmark may share a folder), no
// config file, warnings only, then `args`; and waits up to 10 s for it to
// answer `health`. Returns its pid, or -1 when it could not be spawned or
// did not answer in time (it is killed then).
pid_t StartDaemon(const std::string& medqd, const std::string& socket,
                  const std::vector<std::string>& args);

}  // namespace medq::bench
