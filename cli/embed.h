// `medq embed`: embeds texts from the command line or stdin and prints the
// vectors as JSON lines, TSV or a NumPy .npy array.
#pragma once

#include <string>
#include <vector>

#include "cli/commands.h"
#include "common/messages.h"

namespace medq::cli {

Action SetUpEmbed(CLI::App& sub, const GlobalOptions& global);

// The output of `vectors` (one per text, all of one length) in `format`:
//   "jsonl": one {"index","embedding","tokens"} object per line; `tokens`
//            holds each text's token count (may be empty);
//   "tsv":   one line per text, its components tab-separated;
//   "npy":   a NumPy 1.0 .npy file of float32, shape (texts, dims).
// Pure, for tests.
std::string FormatEmbeddings(const std::vector<std::vector<float>>& vectors,
                             const std::vector<int64_t>& tokens, const std::string& format);

}  // namespace medq::cli
