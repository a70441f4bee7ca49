// Where the reference fixtures live: MEDQ_SHARED_DIR (set at configure time,
// default ../shared beside the source tree), overridable at run time with the
// MEDQ_SHARED_DIR environment variable.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace medq::test {

inline std::filesystem::path SharedDir() {
  if (const char* env = std::getenv("MEDQ_SHARED_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return MEDQ_SHARED_DIR_DEFAULT;
}

inline std::filesystem::path ModelFixture(const char* name) {
  return SharedDir() / "fixtures" / "models" / name;
}

inline std::filesystem::path TokenizerFixture(const char* name) {
  return SharedDir() / "fixtures" / "tokenizers" / name;
}

}  // namespace medq::test
