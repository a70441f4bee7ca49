// embed's typed request (common/requests.h): parsing, its errors, ToParams.
#include <catch2/catch.hpp>

#include "common/requests.h"

namespace medq {

TEST_CASE("embed request: defaults, a list, and a round trip through ToParams", "[embed]") {
  auto one = ParseEmbedRequest(Params{{"input", "hello"}});
  REQUIRE(one.ok());
  CHECK(one->input == std::vector<std::string>{"hello"});
  CHECK_FALSE(one->input_is_list);
  CHECK(one->model.empty());
  CHECK_FALSE(one->normalize.has_value());
  CHECK(one->truncate);
  CHECK_FALSE(one->dimensions.has_value());
  CHECK(one->priority == "normal");
  CHECK(ToParams(*one) == Params{{"input", "hello"}});

  const Params full = {{"model", "m"},          {"input", {"a", "b"}}, {"normalize", false},
                       {"truncate", false},     {"dimensions", 64},    {"priority", "low"},
                       {"queue_timeout_s", 2.5}};
  auto many = ParseEmbedRequest(full);
  REQUIRE(many.ok());
  CHECK(many->input == std::vector<std::string>{"a", "b"});
  CHECK(many->input_is_list);
  CHECK(many->normalize == false);
  CHECK(many->dimensions == 64);
  CHECK(many->queue_timeout_s == 2.5);
  CHECK(ToParams(*many) == full);
  // A one-text list stays a list.
  auto single_list = ParseEmbedRequest(Params{{"input", {"a"}}});
  REQUIRE(single_list.ok());
  CHECK(ToParams(*single_list)["input"].is_array());
}

TEST_CASE("embed request: each bad field is INVALID_REQUEST naming it", "[embed]") {
  const std::vector<std::pair<Params, std::string>> cases = {
      {Params::object(), "params.input"},
      {{{"input", nullptr}}, "params.input"},
      {{{"input", 3}}, "params.input"},
      {{{"input", Params::array()}}, "params.input"},
      {{{"input", {"a", nullptr}}}, "params.input[1]"},
      {{{"input", ""}}, "params.input"},
      {{{"input", {"a", " \n\t"}}}, "params.input[1]"},
      {{{"input", "a"}, {"model", 1}}, "params.model"},
      {{{"input", "a"}, {"normalize", 1}}, "params.normalize"},
      {{{"input", "a"}, {"truncate", "no"}}, "params.truncate"},
      {{{"input", "a"}, {"dimensions", 0}}, "params.dimensions"},
      {{{"input", "a"}, {"dimensions", -3}}, "params.dimensions"},
      {{{"input", "a"}, {"dimensions", 2.0}}, "params.dimensions"},
      {{{"input", "a"}, {"dimensions", 18446744073709551615u}}, "params.dimensions"},
      {{{"input", "a"}, {"priority", "now"}}, "params.priority"},
      {{{"input", "a"}, {"queue_timeout_s", 0}}, "params.queue_timeout_s"},
      {{{"input", "a"}, {"extra", 1}}, "params.extra"},
  };
  for (const auto& [params, field] : cases) {
    INFO(params.dump());
    auto r = ParseEmbedRequest(params);
    REQUIRE_FALSE(r.ok());
    CHECK(r.error().code == ErrorCode::kInvalidRequest);
    CHECK(r.error().message.find(field) != std::string::npos);
  }
}

}  // namespace medq
