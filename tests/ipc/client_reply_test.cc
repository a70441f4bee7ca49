// What the client makes of a reply line's fields (ipc/client.h), whatever
// the daemon sent.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ipc/client.h"

namespace medq::ipc {
namespace {

using nlohmann::json;

TEST_CASE("final events are result, done and error", "[ipc][client]") {
  CHECK(IsFinalEvent(json{{"event", "result"}}));
  CHECK(IsFinalEvent(json{{"event", "done"}}));
  CHECK(IsFinalEvent(json{{"event", "error"}}));
  CHECK_FALSE(IsFinalEvent(json{{"event", "token"}}));
  CHECK_FALSE(IsFinalEvent(json::object()));
}

TEST_CASE("an event that is not a string is no event, never a throw", "[ipc][client]") {
  // json::value threw on a non-string event.
  for (const json& event : {json(5), json(nullptr), json::array({"error"}), json{{"a", 1}}}) {
    const json reply{{"id", 1}, {"event", event}};
    CHECK_FALSE(IsFinalEvent(reply));
    CHECK_FALSE(ErrorOf(reply).has_value());
  }
}

TEST_CASE("ErrorOf decodes an error event", "[ipc][client]") {
  auto e = ErrorOf(json{{"event", "error"}, {"code", "MODEL_NOT_FOUND"}, {"message", "m"}});
  REQUIRE(e.has_value());
  CHECK(e->code == ErrorCode::kModelNotFound);
  CHECK(e->message == "m");
  CHECK_FALSE(ErrorOf(json{{"event", "result"}}).has_value());
}

}  // namespace
}  // namespace medq::ipc
