// A temporary directory for tests, removed with its contents on
// destruction. Header-only, so that any test can use it without the
// daemon-process library (daemon_process.h).
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <system_error>

namespace medq::test {

class TempDir {
 public:
  TempDir() {
    // Short: Unix socket paths are limited to 107 bytes.
    std::string tmpl = "/tmp/medqt.XXXXXX";
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace medq::test
