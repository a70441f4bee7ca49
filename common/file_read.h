// Reading a whole file of a model folder (config.json, tokenizer.json,
// tokenizer_config.json), with the failure told as a protocol error whose code
// says whose fault it is.
#pragma once

#include <filesystem>
#include <string>

#include "common/error.h"
#include "common/result.h"

namespace medq {

// The error for a file that could not be opened or read ("cannot open PATH:
// reason", "cannot read PATH: reason"), from its errno.
// Running out of file descriptors or memory (EMFILE, ENFILE, ENOMEM) is the
// daemon's passing condition, never the request's fault: NOT_READY with a
// retry hint. An I/O error is INTERNAL. Anything else (missing, unreadable,
// a directory) is a broken model folder: INVALID_REQUEST.
Error FileError(const std::filesystem::path& path, int err, const char* verb = "open");

// The file's bytes, or FileError.
Result<std::string> ReadWholeFile(const std::filesystem::path& path);

}  // namespace medq
