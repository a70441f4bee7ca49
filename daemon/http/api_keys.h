// Bearer keys for the HTTP endpoint (`http_api_keys_file`): one key a line,
// blank lines and lines starting with '#' ignored. Reloaded on SIGHUP.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace medq::daemon::http {

class ApiKeys {
 public:
  // Reads `path` (a blocking read: off the loop thread once serving).
  static Result<ApiKeys> Read(const std::string& path);
  // Reads `path`; on failure the keys held stay as they were.
  Status Load(const std::string& path);
  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }
  // True when `authorization` is "Bearer KEY" with one of the keys: the
  // scheme in any case, spaces or tabs between it and the key and around the
  // whole ignored. Every key is compared in full, in time that depends only
  // on the lengths.
  bool Allows(std::string_view authorization) const;

 private:
  std::vector<std::string> keys_;
};

}  // namespace medq::daemon::http
