// The HTTP endpoint's request parsing (daemon/http/http_request_parser.h):
// the input's first byte picks the size of the pieces the rest arrives in
// (as reads would), the rest is the byte stream of a connection: request
// lines, headers, Content-Length and chunked bodies, pipelined requests. The
// parser is fed as HttpConnection feeds it, with small limits so that every
// refusal (400, 413, 431) is reachable, and with the endpoint's API key check
// (ApiKeys::Allows, key "k") as its admit_head. Every whole request's body
// goes through ParseBody, the POST routes' body parser (ParseBoundedJson and
// its nesting bound). Properties: the parser consumes what it is given,
// hands out nothing over its limits, a refused head carries no body, and an
// accepted body is an object no deeper than the bound.
#include <algorithm>
#include <string>
#include <string_view>

#include "daemon/http/api_keys.h"
#include "daemon/http/http_request_parser.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using medq::daemon::http::ApiKeys;
using medq::daemon::http::HttpRequest;
using medq::daemon::http::HttpRequestParser;
using medq::fuzz::Fail;
using Kind = HttpRequestParser::Step::Kind;

constexpr HttpRequestParser::Limits kLimits{1024, 16, 4096};

// Depth of nested arrays and objects, the outermost value being 1.
int Depth(const medq::Params& v) {
  int deepest = 0;
  if (v.is_array() || v.is_object()) {
    for (const auto& item : v)
      deepest = std::max(deepest, Depth(item));
    return deepest + 1;
  }
  return 0;
}

const ApiKeys& Keys() {
  static const ApiKeys* keys = [] {
    static medq::fuzz::MemFile file;
    auto* k = new ApiKeys;
    if (!k->Load(file.Write("# fuzz\nk\n")).ok()) Fail("cannot load the API key");
    return k;
  }();
  return *keys;
}

bool Authorized(const HttpRequest& head) {
  if (head.path == "/health") return true;
  const std::string* auth = head.Header("authorization");
  return auth != nullptr && Keys().Allows(*auth);
}

void Check(const HttpRequest& r) {
  if (r.headers.size() > kLimits.max_headers) Fail("more headers than the limit");
  if (r.body.size() > kLimits.max_body_bytes) Fail("a body over the limit");
  if (r.target.size() > kLimits.max_header_bytes) Fail("a target over the limit");
  if (r.target.compare(0, r.path.size(), r.path) != 0) Fail("the path is not the target's start");
  if (r.body_unread && (!r.body.empty() || r.keep_alive)) Fail("a refused head with a body");
  if (r.body_unread && Authorized(r)) Fail("an authorized head refused");
  if (r.method.empty()) Fail("a request without a method");
  auto body = medq::daemon::http::ParseBody(r);
  if (body.ok()) {
    if (!body->is_object()) Fail("ParseBody accepted a body that is not an object");
    if (Depth(*body) > medq::kMaxJsonDepth) Fail("ParseBody accepted a body over the depth bound");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = data[0] == 0 ? 1 : data[0];
  const std::string_view stream = medq::fuzz::AsText(data + 1, size - 1);
  HttpRequestParser parser(kLimits, &Authorized);
  std::string input;  // read, not parsed yet: HttpConnection's input_
  for (size_t at = 0; at < stream.size(); at += piece) {
    input.append(stream.substr(at, piece));
    while (!input.empty()) {
      HttpRequestParser::Step step = parser.Feed(input);
      if (step.consumed > input.size()) Fail("consumed more than it was given");
      if (step.kind == Kind::kNeedMore && step.consumed != input.size()) {
        Fail("needs more without consuming what it has");
      }
      input.erase(0, step.consumed);
      if (step.kind == Kind::kRefused) {
        if (step.status != 400 && step.status != 413 && step.status != 431) Fail("odd status");
        return 0;  // the connection closes
      }
      if (step.kind == Kind::kNeedMore) break;
      Check(step.request);
      if (step.request.body_unread || parser.upgrade()) return 0;  // closes after the answer
    }
  }
  return 0;
}
