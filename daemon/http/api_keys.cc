#include "daemon/http/api_keys.h"

#include <cctype>
#include <fstream>

namespace medq::daemon::http {
namespace {

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  // Compares every byte of `a` (the key) whatever `b` holds.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    const unsigned char other = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(static_cast<unsigned char>(a[i]) ^ other);
  }
  return diff == 0;
}

std::string Trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

}  // namespace

Result<ApiKeys> ApiKeys::Read(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Error(ErrorCode::kInvalidRequest, "http_api_keys_file " + path + ": cannot read it");
  }
  ApiKeys out;
  std::string line;
  while (std::getline(in, line)) {
    line = Trim(line);
    if (line.empty() || line[0] == '#') continue;
    out.keys_.push_back(line);
  }
  if (out.keys_.empty()) {
    return Error(ErrorCode::kInvalidRequest, "http_api_keys_file " + path + " holds no key");
  }
  return out;
}

Status ApiKeys::Load(const std::string& path) {
  auto read = Read(path);
  if (!read.ok()) return read.error();
  *this = std::move(*read);
  return {};
}

bool ApiKeys::Allows(std::string_view authorization) const {
  // RFC 9110: the scheme is case-insensitive, one or more spaces separate it
  // from the token, and whitespace around a field value is not part of it.
  constexpr std::string_view kBearer = "bearer";
  constexpr std::string_view kSpace = " \t";
  const size_t begin = authorization.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return false;
  authorization = authorization.substr(begin, authorization.find_last_not_of(kSpace) - begin + 1);
  if (authorization.size() <= kBearer.size() ||
      kSpace.find(authorization[kBearer.size()]) == std::string_view::npos) {
    return false;
  }
  for (size_t i = 0; i < kBearer.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(authorization[i])) != kBearer[i]) return false;
  }
  std::string_view presented = authorization.substr(kBearer.size());
  presented.remove_prefix(presented.find_first_not_of(kSpace));  // not npos: trimmed above
  bool allowed = false;
  for (const std::string& key : keys_)
    allowed |= ConstantTimeEqual(key, presented);
  return allowed;
}

}  // namespace medq::daemon::http
