// Prompts and generated text are patient data: they stay out of the log,
// health and queue, unless log_prompts is on (a debugging aid that warns).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/model_repo.h"

namespace medq::test {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

constexpr const char* kPrompt = "Quokkafish Zebrawick presented with";

std::vector<std::string> PrivacyArgs(const ModelRepo& repo, const std::string& log_level,
                                     std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {
      "--models-dir", repo.dir().string(), "--model", "tiny-llama", "--threads", "1", "--log-level",
      log_level};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// The generated text, through the CLI.
std::string GenerateText(const DaemonProcess& d) {
  ProcessResult r = RunMedq(d.socket(), {"generate", "--raw", "--max-tokens", "12", kPrompt});
  REQUIRE(r.status == 0);
  REQUIRE(!r.out.empty());
  return r.out.substr(0, r.out.find_last_not_of('\n') + 1);
}

std::string Dump(const std::string& socket, const std::string& op) {
  auto client = ipc::Client::Connect(socket);
  REQUIRE(client.ok());
  auto reply = client->Call(op, {}, 5s);
  REQUIRE(reply.ok());
  return reply->dump();
}

}  // namespace

TEST_CASE("by default no prompt or output reaches the log, health or queue",
          "[e2e][generate][privacy]") {
  ModelRepo repo;
  DaemonProcess d(PrivacyArgs(repo, "debug"));  // even at log level debug
  const std::string output = GenerateText(d);
  for (const std::string& where :
       {d.Log(), Dump(d.socket(), "health"), Dump(d.socket(), "queue")}) {
    CHECK_THAT(where, !Catch::Contains("Quokkafish") && !Catch::Contains("Zebrawick"));
    if (output.size() >= 8) CHECK_THAT(where, !Catch::Contains(output));
  }
  CHECK_THAT(d.Log(), !Catch::Contains("log_prompts is on"));
}

TEST_CASE("log_prompts logs each prompt and output, with a warning at start",
          "[e2e][generate][privacy]") {
  ModelRepo repo;
  DaemonProcess d(PrivacyArgs(repo, "info", {"--log-prompts", "true"}));
  CHECK_THAT(d.Log(), Catch::Contains("log_prompts is on") && Catch::Contains("patient data"));
  const std::string output = GenerateText(d);
  const std::string log = d.Log();
  CHECK_THAT(log, Catch::Contains(std::string("prompt {\"prompt\":\"") + kPrompt + "\"}"));
  // The output is logged JSON-quoted; plain text shows up as it is.
  CHECK_THAT(log, Catch::Contains("output \""));
  CHECK_THAT(log, Catch::Contains(json(output).dump().substr(1, 8)));
}

}  // namespace medq::test
