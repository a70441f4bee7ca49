#include "cli/embed.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>

#include "common/requests.h"

namespace medq::cli {
namespace {

using nlohmann::json;

// Texts sent per request when reading stdin: well under the daemon's
// default embed_max_inputs, and large enough to fill its batches.
constexpr size_t kTextsPerRequest = 256;

std::string Float(float v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(v));
  return buf;
}

std::string Npy(const std::vector<std::vector<float>>& vectors) {
  const size_t dims = vectors.empty() ? 0 : vectors.front().size();
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                       std::to_string(vectors.size()) + ", " + std::to_string(dims) + "), }";
  // Magic (6) + version (2) + header length (2) + header + '\n', padded
  // with spaces to a multiple of 64 bytes, as NumPy writes it.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  for (const auto& v : vectors) {
    // Little-endian float32: the host order on every platform medq targets.
    out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  }
  return out;
}

}  // namespace

std::string FormatEmbeddings(const std::vector<std::vector<float>>& vectors,
                             const std::vector<int64_t>& tokens, const std::string& format) {
  if (format == "npy") return Npy(vectors);
  std::string out;
  for (size_t i = 0; i < vectors.size(); ++i) {
    if (format == "tsv") {
      for (size_t j = 0; j < vectors[i].size(); ++j)
        out += (j ? "\t" : "") + Float(vectors[i][j]);
      out += "\n";
      continue;
    }
    out += "{\"index\":" + std::to_string(i) + ",\"embedding\":[";
    for (size_t j = 0; j < vectors[i].size(); ++j)
      out += (j ? "," : "") + Float(vectors[i][j]);
    out += "]";
    if (i < tokens.size()) out += ",\"tokens\":" + std::to_string(tokens[i]);
    out += "}\n";
  }
  return out;
}

Action SetUpEmbed(CLI::App& sub, const GlobalOptions& g) {
  struct Options {
    std::vector<std::string> texts;
    std::string model;
    std::string format = "jsonl";
    std::string normalize = "model";
    bool no_truncate = false;
    int64_t dimensions = 0;
    std::string priority = "normal";
  };
  auto o = std::make_shared<Options>();
  sub.add_option("text", o->texts, "Texts to embed; - reads one text per line from stdin")
      ->required();
  sub.add_option("--model", o->model, "Embedding model name or path (default: the daemon's)");
  sub.add_option("--format", o->format, "Output: jsonl (one object per text), tsv or npy")
      ->check(CLI::IsMember({"jsonl", "tsv", "npy"}))
      ->capture_default_str();
  sub.add_option("--normalize", o->normalize,
                 "Unit-length vectors: yes, no, or model (as the model's modules say)")
      ->check(CLI::IsMember({"yes", "no", "model"}))
      ->capture_default_str();
  sub.add_flag("--no-truncate", o->no_truncate,
               "Refuse texts longer than the model's limit instead of cutting them");
  sub.add_option("--dimensions", o->dimensions, "Keep the first N components (Matryoshka)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--priority", o->priority, "high, normal or low")
      ->check(CLI::IsMember({"high", "normal", "low"}))
      ->capture_default_str();
  return [&g, o] {
    std::vector<std::string> texts;
    for (const std::string& t : o->texts) {
      if (t != "-") {
        texts.push_back(t);
        continue;
      }
      for (std::string line; std::getline(std::cin, line);) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        texts.push_back(std::move(line));
      }
    }
    if (o->format == "npy" && !g.json && isatty(STDOUT_FILENO)) {
      std::cerr << "medq: --format npy writes binary data; redirect it to a file\n";
      return kExitUsage;
    }
    auto client = ConnectToDaemon(g);
    if (!client.ok()) return ReportUnreachable(client.error());
    EmbedRequest request;
    request.model = o->model;
    request.input_is_list = true;
    request.truncate = !o->no_truncate;
    if (o->normalize != "model") request.normalize = o->normalize == "yes";
    if (o->dimensions > 0) request.dimensions = o->dimensions;
    request.priority = o->priority;
    std::vector<std::vector<float>> vectors;
    std::vector<int64_t> tokens;
    json results = json::array();
    for (size_t start = 0; start < texts.size(); start += kTextsPerRequest) {
      const size_t end = std::min(texts.size(), start + kTextsPerRequest);
      request.input.assign(texts.begin() + static_cast<std::ptrdiff_t>(start),
                           texts.begin() + static_cast<std::ptrdiff_t>(end));
      auto reply = client->Call("embed", ToParams(request), TimeoutOf(g));
      if (!reply.ok()) {
        return reply.error().code == ErrorCode::kQueueTimeout ? ReportError(reply.error())
                                                              : ReportUnreachable(reply.error());
      }
      if (auto error = ipc::ErrorOf(*reply)) {
        // Name the text by its place in the whole input, not in this request.
        Error e = *error;
        if (start > 0) e.message += " (texts " + std::to_string(start) + " onwards of the input)";
        return ReportError(e);
      }
      const json result = reply->value("result", json::object());
      if (g.json) {
        results.push_back(result);
        continue;
      }
      auto typed = result.get<EmbedResult>();
      for (auto& v : typed.embeddings)
        vectors.push_back(std::move(v));
      tokens.insert(tokens.end(), typed.tokens.begin(), typed.tokens.end());
    }
    if (g.json) {
      // One request: its result as the daemon sent it; several: the list.
      std::cout << (results.size() == 1 ? results.front() : results).dump() << "\n";
    } else {
      std::cout << FormatEmbeddings(vectors, tokens, o->format);
    }
    std::cout << std::flush;
    return kExitOk;
  };
}

}  // namespace medq::cli
