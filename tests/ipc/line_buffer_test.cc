#include "ipc/line_buffer.h"

#include <catch2/catch.hpp>

namespace medq::ipc {

TEST_CASE("complete lines come out whole, in order", "[framing]") {
  LineBuffer b(100);
  REQUIRE(b.Append("one\ntwo\nthr"));
  CHECK(b.NextLine() == "one");
  CHECK(b.NextLine() == "two");
  CHECK_FALSE(b.NextLine().has_value());
  CHECK(b.HasPartialLine());
  REQUIRE(b.Append("ee\n"));
  CHECK(b.NextLine() == "three");
  CHECK_FALSE(b.HasPartialLine());
}

TEST_CASE("a line split across many reads is reassembled", "[framing]") {
  LineBuffer b(1000);
  const std::string line = R"({"v":1,"id":7,"op":"health"})";
  for (char c : line) {
    REQUIRE(b.Append(std::string_view(&c, 1)));
    CHECK_FALSE(b.NextLine().has_value());
  }
  REQUIRE(b.Append("\n"));
  CHECK(b.NextLine() == line);
}

TEST_CASE("empty lines and carriage returns are passed through", "[framing]") {
  LineBuffer b(10);
  REQUIRE(b.Append("\nx\r\n"));
  CHECK(b.NextLine() == "");
  CHECK(b.NextLine() == "x\r");
}

TEST_CASE("a line of exactly the maximum fits, one byte more overflows", "[framing]") {
  LineBuffer ok(5);
  REQUIRE(ok.Append("12345\n"));
  CHECK(ok.NextLine() == "12345");

  LineBuffer partial(5);
  CHECK_FALSE(partial.Append("123456"));  // no newline yet, already too long
  CHECK(partial.overflowed());
  CHECK_FALSE(partial.NextLine().has_value());

  LineBuffer complete(5);
  CHECK_FALSE(complete.Append("ok\n123456\n"));
  CHECK_FALSE(complete.NextLine().has_value());  // poisoned: nothing more is handed out
}

TEST_CASE("the buffer stays bounded over many lines", "[framing]") {
  LineBuffer b(64);
  for (int i = 0; i < 100000; ++i) {
    REQUIRE(b.Append("line number " + std::to_string(i) + "\n"));
    REQUIRE(b.NextLine() == "line number " + std::to_string(i));
  }
  CHECK_FALSE(b.HasPartialLine());
}

}  // namespace medq::ipc

namespace medq::ipc {

TEST_CASE("at the end of the stream the bytes after the last newline are a final line",
          "[framing]") {
  LineBuffer b(64);
  REQUIRE(b.Append("first\nlast"));
  CHECK_FALSE(b.TakeFinalLine().has_value());  // complete lines are taken first
  CHECK(b.NextLine() == "first");
  CHECK_FALSE(b.NextLine().has_value());
  CHECK(b.TakeFinalLine() == "last");
  CHECK_FALSE(b.HasPartialLine());
  CHECK_FALSE(b.TakeFinalLine().has_value());  // only once

  LineBuffer ended(64);
  REQUIRE(ended.Append("whole\n"));
  CHECK(ended.NextLine() == "whole");
  CHECK_FALSE(ended.TakeFinalLine().has_value());  // nothing after the last newline

  LineBuffer overflowed(4);
  CHECK_FALSE(overflowed.Append("123456"));
  CHECK_FALSE(overflowed.TakeFinalLine().has_value());
}

}  // namespace medq::ipc
