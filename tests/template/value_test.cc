// Value printing and JSON: Python's repr/str of floats and strings, and
// json.dumps as transformers' tojson calls it. Expected strings are what
// CPython 3.11 prints (repr(x), json.dumps(x, ensure_ascii=...)).
#include <catch2/catch.hpp>

#include <limits>
#include <string>

#include "daemon/template/json_dump.h"
#include "daemon/template/text_util.h"
#include "daemon/template/value.h"

namespace {

using medq::chat::JsonDump;
using medq::chat::JsonDumpOptions;
using medq::chat::List;
using medq::chat::PyReprFloat;
using medq::chat::Value;

std::string Json(double d) {
  return JsonDump(Value::Float(d), JsonDumpOptions{});
}

}  // namespace

TEST_CASE("floats print as Python repr", "[template][value]") {
  CHECK(PyReprFloat(0.0) == "0.0");
  CHECK(PyReprFloat(-0.0) == "-0.0");
  CHECK(PyReprFloat(1.0) == "1.0");
  CHECK(PyReprFloat(1e16) == "1e+16");
  CHECK(PyReprFloat(1e15) == "1000000000000000.0");
  CHECK(PyReprFloat(123456789012345680.0) == "1.2345678901234568e+17");
  CHECK(PyReprFloat(1e-4) == "0.0001");
  CHECK(PyReprFloat(1e-5) == "1e-05");
  CHECK(PyReprFloat(0.1 + 0.2) == "0.30000000000000004");
  CHECK(PyReprFloat(5e-324) == "5e-324");
  CHECK(PyReprFloat(1.7976931348623157e308) == "1.7976931348623157e+308");
  CHECK(PyReprFloat(2.5e-7) == "2.5e-07");
  CHECK(PyReprFloat(-1.5) == "-1.5");
  CHECK(PyReprFloat(100.0) == "100.0");
  CHECK(PyReprFloat(1234.5678) == "1234.5678");
  CHECK(PyReprFloat(std::numeric_limits<double>::infinity()) == "inf");
  CHECK(PyReprFloat(-std::numeric_limits<double>::infinity()) == "-inf");
  CHECK(PyReprFloat(std::numeric_limits<double>::quiet_NaN()) == "nan");
}

TEST_CASE("json floats follow json.dumps", "[template][value]") {
  CHECK(Json(1.0) == "1.0");
  CHECK(Json(1e16) == "1e+16");
  CHECK(Json(std::numeric_limits<double>::infinity()) == "Infinity");
  CHECK(Json(-std::numeric_limits<double>::infinity()) == "-Infinity");
  CHECK(Json(std::numeric_limits<double>::quiet_NaN()) == "NaN");
}

TEST_CASE("string repr picks quotes and escapes like CPython", "[template][value]") {
  const Value v = Value::MakeList(List{Value::Str("a'b"), Value::Str("a\"b"), Value::Str("a'\"b"),
                                       Value::Str("\x7f"), Value::Str("\xc2\x85"),
                                       Value::Str("\xe2\x80\xa8"), Value::Str("\xf0\x9f\x98\x80"),
                                       Value::Str("\xc3\xa9"), Value::Str("\\")});
  CHECK(v.Repr() ==
        "[\"a'b\", 'a\"b', 'a\\'\"b', '\\x7f', '\\x85', '\\u2028', '\xf0\x9f\x98\x80', "
        "'\xc3\xa9', '\\\\']");
}

TEST_CASE("json strings: ensure_ascii off and on", "[template][value]") {
  const Value v =
      Value::MakeList(List{Value::Str("\x7f"), Value::Str("\xe2\x80\xa8"),
                           Value::Str("\xc3\xa9\xf0\x9f\x98\x80"), Value::Str("\x1f\b")});
  CHECK(JsonDump(v, JsonDumpOptions{}) ==
        "[\"\x7f\", \"\xe2\x80\xa8\", \"\xc3\xa9\xf0\x9f\x98\x80\", \"\\u001f\\b\"]");
  JsonDumpOptions ascii;
  ascii.ensure_ascii = true;
  CHECK(JsonDump(Value::Str("\xc3\xa9\xf0\x9f\x98\x80"), ascii) == "\"\\u00e9\\ud83d\\ude00\"");
}

TEST_CASE("Python equality across numeric types", "[template][value]") {
  CHECK(medq::chat::ValuesEqual(Value::Int(1), Value::Float(1.0)));
  CHECK(medq::chat::ValuesEqual(Value::Int(1), Value::Bool(true)));
  CHECK_FALSE(medq::chat::ValuesEqual(Value::Str("1"), Value::Int(1)));
  CHECK_FALSE(
      medq::chat::ValuesEqual(Value::MakeTuple({Value::Int(1)}), Value::MakeList({Value::Int(1)})));
  CHECK(medq::chat::ValuesEqual(Value::None(), Value::None()));
}
