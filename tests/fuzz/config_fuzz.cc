// medqd's configuration file (daemon/config.cc, ParseConfigText: the keys
// and checks LoadConfig applies to the file --config names), and the
// http_listen address it may set (daemon/http/http_address.h).
#include "daemon/config.h"
#include "daemon/http/http_address.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto config = medq::daemon::ParseConfigText(medq::fuzz::AsText(data, size));
  if (!config.ok()) return 0;
  if (!config->http_listen.empty()) {
    if (auto address = medq::daemon::http::ParseHttpAddress(config->http_listen); address.ok()) {
      (void)medq::daemon::http::IsLoopback(*address);
    }
  }
  (void)medq::daemon::FormatConfig(*config);
  return 0;
}
