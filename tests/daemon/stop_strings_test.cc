#include "daemon/worker/stop_strings.h"

#include <catch2/catch.hpp>

namespace medq::daemon {

TEST_CASE("text without stop strings passes straight through", "[stop]") {
  StopStrings s({});
  CHECK(s.Push("abc") == "abc");
  CHECK(s.Finish().empty());
  CHECK_FALSE(s.stopped());
}

TEST_CASE("a stop string split across pieces is caught and never emitted", "[stop]") {
  StopStrings s({"###"});
  std::string out;
  for (const char* piece : {"Answer: 4", "2 #", "#", "# more"})
    out += s.Push(piece);
  CHECK(s.stopped());
  CHECK(out == "Answer: 42 ");
  CHECK(s.Push("later").empty());
  CHECK(s.Finish().empty());
}

TEST_CASE("a held-back prefix is released when it turns out not to be a stop", "[stop]") {
  StopStrings s({"END"});
  CHECK(s.Push("the E") == "the ");
  CHECK(s.Push("ND") == "");
  CHECK(s.stopped());

  StopStrings t({"END"});
  CHECK(t.Push("the EN") == "the ");
  CHECK(t.Push("gine") == "ENgine");
  CHECK(t.Push("E") == "");
  CHECK(t.Finish() == "E");
  CHECK_FALSE(t.stopped());
}

TEST_CASE("the earliest of several stop strings wins", "[stop]") {
  StopStrings s({"world", "lo"});
  CHECK(s.Push("hello world") == "hel");
  CHECK(s.stopped());
}

}  // namespace medq::daemon
