// A deterministic mixed-text corpus for the tokenizer benchmark.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace medq::bench {

// Documents of a few KiB each, totalling about target_bytes: English prose,
// clinical-note-like text, code, CJK and emoji, mixed. The same seed gives the
// same corpus on every machine.
std::vector<std::string> MakeCorpus(size_t target_bytes, uint64_t seed = 42);

}  // namespace medq::bench
