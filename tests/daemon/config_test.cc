#include "daemon/config.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "tests/support/daemon_process.h"
#include "tests/support/scoped_env.h"

namespace medq::daemon {
namespace {

using ::medq::test::ScopedEnv;

ConfigOutcome Load(std::vector<std::string> args) {
  std::vector<const char*> argv = {"medqd"};
  for (const std::string& a : args)
    argv.push_back(a.c_str());
  return LoadConfig(static_cast<int>(argv.size()), argv.data());
}

Config LoadOk(std::vector<std::string> args) {
  ConfigOutcome out = Load(std::move(args));
  REQUIRE(std::holds_alternative<Config>(out));
  return std::get<Config>(out);
}

}  // namespace

TEST_CASE("defaults apply when nothing is given", "[config]") {
  test::TempDir dir;
  std::ofstream(dir.path() / "empty.conf").flush();
  Config c = LoadOk({"--config", (dir.path() / "empty.conf").string()});
  CHECK(c.max_connections == 256);
  CHECK(c.max_message_bytes == 16 << 20);
  CHECK(c.queue_timeout_s == 300);
  CHECK(c.log_level == "info");
  CHECK_FALSE(c.socket.empty());
}

TEST_CASE("precedence is flags > environment > file > defaults", "[config]") {
  test::TempDir dir;
  const std::string file = (dir.path() / "medqd.conf").string();
  std::ofstream(file) << "# comment\nmax_connections = 11\nmax_queue = 12\nlog_level = \"debug\"\n"
                         "idle_timeout_s = 13\n";

  SECTION("file beats defaults") {
    Config c = LoadOk({"--config", file});
    CHECK(c.max_connections == 11);
    CHECK(c.max_queue == 12);
    CHECK(c.log_level == "debug");
    CHECK(c.idle_timeout_s == 13);
    CHECK(c.config_file == file);
  }
  SECTION("environment beats file") {
    ScopedEnv env("MEDQ_MAX_CONNECTIONS", "21");
    Config c = LoadOk({"--config", file});
    CHECK(c.max_connections == 21);
    CHECK(c.max_queue == 12);
  }
  SECTION("flags beat environment and file, in either spelling") {
    ScopedEnv env("MEDQ_MAX_CONNECTIONS", "21");
    ScopedEnv env2("MEDQ_MAX_QUEUE", "22");
    Config c = LoadOk({"--config", file, "--max-connections", "31", "--max_queue=32"});
    CHECK(c.max_connections == 31);
    CHECK(c.max_queue == 32);
  }
  SECTION("MEDQ_CONFIG names the file") {
    ScopedEnv env("MEDQ_CONFIG", file.c_str());
    Config c = LoadOk({});
    CHECK(c.max_connections == 11);
  }
}

TEST_CASE("invalid values are refused at start", "[config]") {
  test::TempDir dir;
  const std::string file = (dir.path() / "bad.conf").string();
  SECTION("a flag out of range") {
    auto out = Load({"--config", file, "--max-connections", "0"});
    REQUIRE(std::holds_alternative<ExitNow>(out));
    CHECK(std::get<ExitNow>(out).status == 64);
  }
  SECTION("a bad value in the file") {
    std::ofstream(file) << "log_level = \"loud\"\n";
    auto out = Load({"--config", file});
    REQUIRE(std::holds_alternative<ExitNow>(out));
    CHECK(std::get<ExitNow>(out).status == 64);
  }
  SECTION("a bad value in the environment") {
    ScopedEnv env("MEDQ_IDLE_TIMEOUT_S", "soon");
    std::ofstream(file).flush();
    auto out = Load({"--config", file});
    REQUIRE(std::holds_alternative<ExitNow>(out));
    CHECK(std::get<ExitNow>(out).status == 64);
  }
  SECTION("a config file that does not exist, named explicitly") {
    auto out = Load({"--config", (dir.path() / "missing.conf").string()});
    REQUIRE(std::holds_alternative<ExitNow>(out));
    CHECK(std::get<ExitNow>(out).status == 64);
  }
}

TEST_CASE("quantize takes none, int8 and int4, and refuses other names", "[config]") {
  CHECK(ParseConfigText("").value().quantize == "none");
  CHECK(ParseConfigText("quantize = \"int8\"\n").value().quantize == "int8");
  CHECK(ParseConfigText("quantize = \"int4\"\n").value().quantize == "int4");
  auto other = ParseConfigText("quantize = \"fp8\"\n");
  REQUIRE_FALSE(other.ok());
  CHECK(other.error().code == ErrorCode::kInvalidRequest);
  CHECK_THAT(other.error().message, Catch::Contains("none, int8, int4"));
  test::TempDir dir;
  const std::string empty = (dir.path() / "empty.conf").string();
  std::ofstream(empty).flush();
  CHECK(LoadOk({"--config", empty, "--quantize", "int8"}).quantize == "int8");
  CHECK(LoadOk({"--config", empty, "--quantize", "int4"}).quantize == "int4");
  auto flag = Load({"--config", empty, "--quantize", "int3"});
  REQUIRE(std::holds_alternative<ExitNow>(flag));
  CHECK(std::get<ExitNow>(flag).status == 64);
}

TEST_CASE("the printed configuration reads back as the same configuration", "[config]") {
  test::TempDir dir;
  const std::string empty = (dir.path() / "empty.conf").string();
  std::ofstream(empty).flush();
  Config c = LoadOk({"--config", empty, "--max-queue", "7", "--socket", "/tmp/x/medq.sock",
                     "--log-level", "warn"});
  const std::string printed = (dir.path() / "printed.conf").string();
  std::ofstream(printed) << FormatConfig(c);
  Config back = LoadOk({"--config", printed});
  CHECK(back.max_queue == 7);
  CHECK(back.socket == "/tmp/x/medq.sock");
  CHECK(back.log_level == "warn");
  CHECK(FormatConfig(back).substr(FormatConfig(back).find('\n')) ==
        FormatConfig(c).substr(FormatConfig(c).find('\n')));
}

}  // namespace medq::daemon

namespace medq::daemon {

TEST_CASE("ParseConfigText reads a file's text as --config reads the file", "[config]") {
  const std::string text =
      "# comment\nmax_connections = 11\nlog_level = \"debug\"\nidle_timeout_s = 2.5\n"
      "allow_model_paths = true\nhttp_listen = \"127.0.0.1:8090\"\n";
  auto parsed = ParseConfigText(text);
  REQUIRE(parsed.ok());
  test::TempDir dir;
  const std::string file = (dir.path() / "medqd.conf").string();
  std::ofstream(file) << text;
  const Config loaded = LoadOk({"--config", file});
  CHECK(parsed->max_connections == 11);
  CHECK(parsed->log_level == "debug");
  CHECK(parsed->idle_timeout_s == 2.5);
  CHECK(parsed->allow_model_paths);
  CHECK(parsed->http_listen == "127.0.0.1:8090");
  CHECK(parsed->max_connections == loaded.max_connections);
  CHECK(parsed->log_level == loaded.log_level);
  CHECK(parsed->http_listen == loaded.http_listen);
  CHECK(parsed->max_queue == Config{}.max_queue);  // absent: the default
}

TEST_CASE("ParseConfigText refuses what LoadConfig refuses, as an error value", "[config]") {
  for (const char* text : {"max_conections = 3\n", "log_level = \"loud\"\n",
                           "max_connections = 0\n", "idle_timeout_s = soon\n"}) {
    auto parsed = ParseConfigText(text);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.error().code == ErrorCode::kInvalidRequest);
    CHECK_FALSE(parsed.error().message.empty());
  }
}

TEST_CASE("A reused ConfigTextParser reads each text as a fresh one does", "[config]") {
  ConfigTextParser parser;
  const std::vector<std::string> texts = {
      "max_connections = 11\nlog_level = \"debug\"\n",
      "idle_timeout_s = 2.5\n",  // max_connections back to its default
      "max_connections = 0\n",   // refused
      "max_conections = 3\n",    // refused: a misspelt key
      "http_listen = \"127.0.0.1:8090\"\nmax_connections = 12\n",
      "",  // every default
      "max_connections = 11\nmax_connections = 13\n",
  };
  for (int round = 0; round < 2; ++round) {
    for (const std::string& text : texts) {
      CAPTURE(round, text);
      auto reused = parser.Parse(text);
      auto fresh = ParseConfigText(text);
      REQUIRE(reused.ok() == fresh.ok());
      if (fresh.ok()) {
        CHECK(FormatConfig(*reused) == FormatConfig(*fresh));
      } else {
        CHECK(reused.error().code == fresh.error().code);
        CHECK(reused.error().message == fresh.error().message);
      }
    }
  }
  auto last = parser.Parse("idle_timeout_s = 2.5\n");
  REQUIRE(last.ok());
  CHECK(last->max_connections == Config{}.max_connections);
  CHECK(last->idle_timeout_s == 2.5);
}

}  // namespace medq::daemon
