// Reading a whole file of a model folder (config.json, tokenizer.json,
// tokenizer_config.json), with the failure told as a protocol error whose code
// says whose fault it is.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <string>

#include "common/error.h"
#include "common/result.h"

namespace medq {

// A model file as messages name it: its folder and its own name
// ("tiny-llama/config.json"), never the daemon's absolute path, which a
// client (over HTTP, anyone on the network) has no business knowing.
std::string ModelFileName(const std::filesystem::path& path);

// Opens a model file for reading, only if it is a regular file, without
// ever blocking: O_NONBLOCK|O_CLOEXEC, then fstat. A FIFO (whose open would
// wait for a writer forever), a socket, a device or a directory is
// INVALID_REQUEST naming the file; other failures are FileError's. Returns
// the descriptor (the caller closes it) and fills `st` when given.
Result<int> OpenRegularFile(const std::filesystem::path& path, struct stat* st = nullptr);

// The error for a file that could not be opened or read ("cannot open
// FOLDER/FILE: reason", "cannot read FOLDER/FILE: reason"), from its errno.
// Running out of file descriptors or memory (EMFILE, ENFILE, ENOMEM) is the
// daemon's passing condition, never the request's fault: NOT_READY with a
// retry hint. An I/O error is INTERNAL. Anything else (missing, unreadable,
// a directory) is a broken model folder: INVALID_REQUEST.
Error FileError(const std::filesystem::path& path, int err, const char* verb = "open");

// The file's bytes, or FileError.
Result<std::string> ReadWholeFile(const std::filesystem::path& path);

}  // namespace medq
