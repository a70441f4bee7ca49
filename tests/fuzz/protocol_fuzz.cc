// The protocol line and envelope (common/protocol.h): every request line the
// daemon reads goes through ParseRequest, and the error reply echoes its id.
// The same bytes as a line from the daemon: what the CLI's client does with
// a reply (ipc/client.h: IsFinalEvent, ErrorOf, DecodeError).
#include <nlohmann/json.hpp>

#include "common/protocol.h"
#include "ipc/client.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using medq::fuzz::Fail;
  const std::string_view line = medq::fuzz::AsText(data, size);
  // ipc::Client keeps the lines that parse as an object.
  const auto reply = nlohmann::json::parse(line, nullptr, false);
  if (!reply.is_discarded() && reply.is_object()) {
    (void)medq::ipc::IsFinalEvent(reply);
    (void)medq::ipc::ErrorOf(reply);
  }

  nlohmann::json id;
  const auto request = medq::ParseRequest(line, &id);
  if (!request.ok()) {
    // The reply to a bad line always parses (protocol.h).
    const std::string error_line = medq::EncodeError(id, request.error());
    const auto parsed = nlohmann::json::parse(error_line, nullptr, false);
    if (parsed.is_discarded()) Fail("an error reply does not parse");
    if (medq::DecodeError(parsed).code != request.error().code) Fail("an error's code changed");
    return 0;
  }
  // A parsed request encodes to a line that parses again.
  std::string again = medq::EncodeRequest(request->id, request->op, request->params);
  again.pop_back();  // the newline
  nlohmann::json id_again;
  if (!medq::ParseRequest(again, &id_again).ok()) Fail("a re-encoded request does not parse");
  if (id_again != request->id) Fail("a re-encoded request's id changed");
  return 0;
}
