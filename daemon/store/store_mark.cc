#include "daemon/store/store_mark.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <random>
#include <system_error>

#include <nlohmann/json.hpp>

#include "common/write_all.h"

namespace medq::daemon::store {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kMaxMarkBytes = 4096;

Error MarkError(const fs::path& path, const std::string& why) {
  return Error(ErrorCode::kInternal, "job store mark " + path.filename().string() + ": " + why);
}

}  // namespace

Result<std::optional<StoreMark>> ReadStoreMark(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<StoreMark>();
    return MarkError(path, std::system_category().message(errno));
  }
  std::string text(kMaxMarkBytes + 1, '\0');
  ssize_t n = 0;
  do {
    n = ::read(fd, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  ::close(fd);
  if (n < 0) return MarkError(path, std::system_category().message(errno));
  if (static_cast<size_t>(n) > kMaxMarkBytes) return MarkError(path, "is too large");
  text.resize(static_cast<size_t>(n));
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return MarkError(path, "is not valid");
  StoreMark mark;
  // Ids and counts are SQLite integers: a number past the largest is damage
  // (as a floor it would wrap the next id around to j1).
  auto number = [&](const char* key, uint64_t& out) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned()) return false;
    out = it->get<uint64_t>();
    return out <= static_cast<uint64_t>(INT64_MAX);
  };
  auto store = j.find("store");
  if (store == j.end() || !store->is_string() || !IsStoreId(store->get<std::string>()) ||
      !number("commits", mark.commits) || !number("last_id", mark.last_id) ||
      !number("reserved", mark.reserved)) {
    return MarkError(path, "is not valid");
  }
  mark.store = store->get<std::string>();
  return std::optional<StoreMark>(mark);
}

Status WriteStoreMark(const fs::path& path, const StoreMark& mark, bool durable) {
  const std::string text = json{{"v", 1},
                                {"store", mark.store},
                                {"commits", mark.commits},
                                {"last_id", mark.last_id},
                                {"reserved", mark.reserved}}
                               .dump() +
                           "\n";
  fs::path tmp = path;
  tmp += ".new";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return MarkError(path, std::system_category().message(errno));
  const bool written = WriteAll(fd, text) && (!durable || ::fsync(fd) == 0);
  const int saved = errno;
  ::close(fd);
  if (!written || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = written ? errno : saved;
    ::unlink(tmp.c_str());
    return MarkError(path, std::system_category().message(err));
  }
  if (durable) {
    const int dir = ::open(path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
  return Status::Ok();
}

std::string NewStoreId() {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (int i = 0; i < 8; ++i) {
    const unsigned v = rd();
    for (int nibble = 0; nibble < 4; ++nibble)
      id += kHex[(v >> (nibble * 4)) & 0xf];
  }
  return id;
}

bool IsStoreId(std::string_view id) {
  return id.size() == 32 && id.find_first_not_of("0123456789abcdef") == std::string_view::npos;
}

}  // namespace medq::daemon::store
