// Every op's params (common/requests.h, common/generate_params.h): the input
// is the `params` value of a request line, which goes through ParseRequest
// (and its depth limit) as in the daemon, then through each op's parser.
// What an op parser accepts, the CLI's ToParams/ToJson of it must give back
// as params that parse again.
#include <string>

#include "common/generate_params.h"
#include "common/job_requests.h"
#include "common/protocol.h"
#include "common/requests.h"
#include "tests/fuzz/fuzz_input.h"

namespace {

using medq::fuzz::Fail;

template <typename R, typename Parse>
void RoundTrip(const R& request, Parse parse, const char* what) {
  if (!parse(medq::ToParams(request)).ok()) Fail(what);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string line = R"({"v":1,"id":1,"op":"fuzz","params":)";
  line += medq::fuzz::AsText(data, size);
  line += "}";
  nlohmann::json id;
  const auto request = medq::ParseRequest(line, &id);
  if (!request.ok()) return 0;
  const medq::Params& p = request->params;

  if (auto r = medq::ParseGenerateParams(p); r.ok()) {
    if (!medq::ParseGenerateParams(medq::ToJson(*r)).ok()) Fail("generate: ToJson does not parse");
  }
  if (auto r = medq::ParseLoadRequest(p); r.ok()) {
    RoundTrip(*r, medq::ParseLoadRequest, "load: ToParams does not parse");
  }
  (void)medq::ParseUnloadRequest(p);
  if (auto r = medq::ParseTokenizeRequest(p); r.ok()) {
    RoundTrip(*r, medq::ParseTokenizeRequest, "tokenize: ToParams does not parse");
  }
  (void)medq::ParseDetokenizeRequest(p);
  (void)medq::ParseApplyTemplateRequest(p);
  if (auto r = medq::ParseEmbedRequest(p); r.ok()) {
    RoundTrip(*r, medq::ParseEmbedRequest, "embed: ToParams does not parse");
  }
  (void)medq::ParseCancelRequest(p);
  (void)medq::ParseInjectFaultRequest(p);
  // submit's inner params go to their op's parser, as the daemon does.
  if (auto r = medq::ParseSubmitRequest(p); r.ok()) {
    (void)medq::ParseGenerateParams(r->params);
    (void)medq::ParseEmbedRequest(r->params);
  }
  (void)medq::ParseJobRequest(p);
  (void)medq::ParseResultRequest(p);
  return 0;
}
