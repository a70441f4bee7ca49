// Typed reads of an op's params for every op's parser: a field of the wrong
// type is INVALID_REQUEST naming it ("params.model must be a string"), never
// an exception from the JSON library (which the daemon would answer INTERNAL).
#pragma once

#include <string>

#include "common/protocol.h"

#include "common/result.h"

namespace medq {

// INVALID_REQUEST naming the field: "params.KEY WHAT".
Error InvalidParam(const std::string& key, const std::string& what);

// Absent or null leaves `out` as it is.
Status ReadString(const Params& params, const char* key, std::string& out);
Status ReadBool(const Params& params, const char* key, bool& out);

}  // namespace medq
