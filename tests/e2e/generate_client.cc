#include "tests/e2e/generate_client.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <thread>

#include "ipc/client.h"
#include "tests/support/fixtures.h"

namespace medq::test {

using nlohmann::json;
using namespace std::chrono_literals;

json Reference(const char* model) {
  std::ifstream in(ModelFixture(model) / "reference.json");
  return json::parse(in);
}

std::string Run::Text() const {
  std::string text;
  for (const json& e : events) {
    if (e["event"] == "token") text += e["text"].get<std::string>();
  }
  return text;
}

std::vector<int32_t> Run::Ids() const {
  std::vector<int32_t> ids;
  for (const json& e : events) {
    for (const json& id : e.value("ids", json::array()))
      ids.push_back(id.get<int32_t>());
  }
  return ids;
}

int Run::Count(const std::string& event) const {
  int n = 0;
  for (const json& e : events)
    n += e["event"] == event;
  return n;
}

Run Collect(RawClient& c, const json& id, std::chrono::milliseconds timeout) {
  Run run;
  for (;;) {
    auto e = c.Read(timeout);
    REQUIRE(e.has_value());
    if ((*e)["id"] != id) continue;
    run.events.push_back(*e);
    const std::string ev = (*e)["event"];
    if (ev == "done" || ev == "error" || ev == "result") return run;
  }
}

void SendGenerate(RawClient& c, const json& id, const json& params) {
  REQUIRE(c.Send(json{{"v", 1}, {"id", id}, {"op", "generate"}, {"params", params}}.dump() + "\n"));
}

Run Generate(const std::string& socket, const json& params) {
  RawClient c(socket);
  SendGenerate(c, 1, params);
  return Collect(c, 1);
}

std::vector<std::string> DaemonArgs(const ModelRepo& repo, std::vector<std::string> extra) {
  std::vector<std::string> args = {"--models-dir", repo.dir().string(), "--model",
                                   "tiny-llama",   "--threads",         "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// Waits until `queue` shows `running` running and `waiting` waiting jobs.
nlohmann::json CallOp(const std::string& socket, const std::string& op,
                      const nlohmann::json& params, std::chrono::milliseconds timeout) {
  auto client = ipc::Client::Connect(socket);
  REQUIRE(client.ok());
  auto reply = client->Call(op, params, timeout);
  REQUIRE(reply.ok());
  return *reply;
}

void AwaitQueue(const std::string& socket, size_t running, size_t waiting) {
  auto client = ipc::Client::Connect(socket);
  REQUIRE(client.ok());
  for (int i = 0; i < 500; ++i) {
    auto q = client->Call("queue", {}, 5s);
    REQUIRE(q.ok());
    if ((*q)["result"]["running"].size() == running &&
        (*q)["result"]["waiting"].size() == waiting) {
      return;
    }
    std::this_thread::sleep_for(20ms);
  }
  FAIL("queue never showed " << running << " running and " << waiting << " waiting");
}

json With(json base, const json& extra) {
  base.update(extra);
  return base;
}

}  // namespace medq::test
