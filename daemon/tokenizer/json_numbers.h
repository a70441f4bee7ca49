// Numbers read from tokenizer.json. nlohmann's get<int32_t>() or
// value("key", size_t{0}) converts whatever number it finds: a float out of
// the target's range is undefined behaviour, and 2^32 + 1 or -1 silently
// become other numbers. The Rust tokenizers library refuses such files (serde
// wants a u32 or a usize), and so do these readers: they take integers in
// range only and say nothing else.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include <nlohmann/json_fwd.hpp>

namespace medq::tokenizer {

// A token id: an integer in [0, INT32_MAX]; nullopt for anything else (a
// float, a negative or larger number, a string).
std::optional<int32_t> TokenIdOf(const nlohmann::json& v);

// A count (serde's usize): a non-negative integer; nullopt for anything else.
std::optional<size_t> CountOf(const nlohmann::json& v);

// The count at object[key], or fallback when the key is absent (a serde
// default); nullopt when it is present but not a count.
std::optional<size_t> CountOf(const nlohmann::json& object, const char* key, size_t fallback);

}  // namespace medq::tokenizer
