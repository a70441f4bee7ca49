// medqd's configuration file (daemon/config.cc, ConfigTextParser: the keys
// and checks LoadConfig applies to the file --config names), and the
// http_listen address it may set (daemon/http_address.h). One parser for
// every input, cleared before each (ParseConfigText builds its option table
// per call, which made this target 400 executions a second); the config unit
// test checks that a reused parser reads each text as a fresh one does.
#include "daemon/config.h"
#include "daemon/http_address.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static medq::daemon::ConfigTextParser parser;
  auto config = parser.Parse(medq::fuzz::AsText(data, size));
  if (!config.ok()) return 0;
  if (!config->http_listen.empty()) {
    if (auto address = medq::daemon::http::ParseHttpAddress(config->http_listen); address.ok()) {
      (void)medq::daemon::http::IsLoopback(*address);
    }
  }
  (void)medq::daemon::FormatConfig(*config);
  return 0;
}
