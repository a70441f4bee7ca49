// A small filesystem of its own (tmpfs) mounted over a test's folder, so
// that a test can fill a disk; unmounted on destruction. Mounting needs
// CAP_SYS_ADMIN: without it ok() is false and the test reports itself
// skipped (or leaves out what needs a full disk). Header-only.
#pragma once

#include <sys/mount.h>

#include <filesystem>
#include <string>

namespace medq::test {

class SmallFilesystem {
 public:
  // `size`: tmpfs's size option, e.g. "256k", "4m".
  SmallFilesystem(std::filesystem::path at, const std::string& size)
      : at_(std::move(at)),
        ok_(mount("tmpfs", at_.c_str(), "tmpfs", 0, ("size=" + size + ",mode=0700").c_str()) == 0) {
  }
  ~SmallFilesystem() {
    if (ok_) umount2(at_.c_str(), MNT_DETACH);
  }
  SmallFilesystem(const SmallFilesystem&) = delete;
  SmallFilesystem& operator=(const SmallFilesystem&) = delete;
  bool ok() const { return ok_; }

 private:
  std::filesystem::path at_;
  bool ok_;
};

}  // namespace medq::test
