#include "common/params.h"

namespace medq {

Error InvalidParam(const std::string& key, const std::string& what) {
  return InvalidField(key, "params." + key + " " + what);
}

Status ReadString(const Params& params, const char* key, std::string& out) {
  auto it = params.find(key);
  if (it == params.end() || it->is_null()) return Status::Ok();
  if (!it->is_string()) return InvalidParam(key, "must be a string");
  out = it->get<std::string>();
  return Status::Ok();
}

Status ReadBool(const Params& params, const char* key, bool& out) {
  auto it = params.find(key);
  if (it == params.end() || it->is_null()) return Status::Ok();
  if (!it->is_boolean()) return InvalidParam(key, "must be true or false");
  out = it->get<bool>();
  return Status::Ok();
}

}  // namespace medq
