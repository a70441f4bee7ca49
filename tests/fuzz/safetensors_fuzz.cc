// Safetensors files (daemon/engine/safetensors): the input is a whole file,
// opened as the engine opens weights (the header checked in full before any
// tensor byte is read); every tensor an accepted header lists is then found
// by name and its first and last bytes read, which must lie in the file.
#include <cstddef>

#include "daemon/engine/safetensors.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static medq::fuzz::MemFile file;
  auto opened = medq::engine::SafetensorsFile::Open(file.Write(medq::fuzz::AsText(data, size)));
  if (!opened.ok()) return 0;
  const auto& st = **opened;
  unsigned sum = 0;
  for (const auto& info : st.tensors()) {
    if (st.Find(info.name) == nullptr) medq::fuzz::Fail("a listed tensor is not found by name");
    (void)info.numel();
    if (info.end > info.begin) {
      sum += static_cast<unsigned>(st.Data(info)[0]);
      sum += static_cast<unsigned>(st.Data(info)[info.end - info.begin - 1]);
    }
  }
  // Keeps the reads above from being optimized away.
  volatile unsigned sink = sum;
  (void)sink;
  return 0;
}
