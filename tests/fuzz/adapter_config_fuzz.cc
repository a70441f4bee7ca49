// A LoRA adapter's adapter_config.json (daemon/engine/adapter_config), read
// from a file as MergeAdapter reads it.
#include "daemon/engine/adapter_config.h"
#include "tests/fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static medq::fuzz::MemFile file;
  (void)medq::engine::ParseAdapterConfig(file.Write(medq::fuzz::AsText(data, size)));
  return 0;
}
