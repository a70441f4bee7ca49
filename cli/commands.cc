#include "cli/commands.h"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "cli/embed.h"
#include "cli/format.h"
#include "cli/generate.h"
#include "cli/jobs.h"
#include "common/messages.h"
#include "common/requests.h"

namespace medq::cli {
namespace {

using nlohmann::json;

Action SetUpHealth(CLI::App&, const GlobalOptions& g) {
  return [&g] {
    return RunOneShot(
        g, "health", json::object(),
        [](const json& r) { return FormatHealth(r.get<HealthInfo>()); },
        // Healthy: 0. Answering but not ready (starting, draining): 75.
        [](const json& r) { return r.value("ready", false) ? kExitOk : kExitTempFail; });
  };
}

Action SetUpQueue(CLI::App& sub, const GlobalOptions& g) {
  auto watch = std::make_shared<bool>(false);
  auto interval = std::make_shared<double>(1.0);
  sub.add_flag("-w,--watch", *watch, "Refresh until interrupted");
  sub.add_option("--interval", *interval, "Seconds between refreshes with --watch")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str();
  return [&g, watch, interval] {
    auto format = [](const json& r) { return FormatQueue(r.get<QueueInfo>()); };
    if (!*watch) return RunOneShot(g, "queue", json::object(), format);
    const bool tty = isatty(STDOUT_FILENO) != 0;
    for (;;) {
      if (tty) std::cout << "\033[H\033[2J";  // home, clear screen
      int status = RunOneShot(g, "queue", json::object(), format);
      if (status != kExitOk) return status;
      std::this_thread::sleep_for(std::chrono::duration<double>(*interval));
    }
  };
}

Action SetUpCleanup(CLI::App&, const GlobalOptions& g) {
  return [&g] {
    return RunOneShot(g, "cleanup-memory", json::object(),
                      [](const json& r) { return FormatCleanup(r.get<CleanupInfo>()); });
  };
}

Action SetUpVersion(CLI::App&, const GlobalOptions& g) {
  return [&g] {
    return RunOneShot(g, "version", json::object(),
                      [](const json& r) { return FormatVersion(r.get<VersionInfo>()); });
  };
}

Action SetUpCancel(CLI::App& sub, const GlobalOptions& g) {
  auto job = std::make_shared<std::string>();
  sub.add_option("job", *job, "Job id, as `medq queue` shows it")->required();
  return [&g, job] {
    return RunOneShot(g, "cancel", {{"job", *job}}, [](const json& r) {
      return "job " + r.value("job", "") + ": " + r.value("state", "") + "\n";
    });
  };
}

Action SetUpModels(CLI::App&, const GlobalOptions& g) {
  return [&g] {
    return RunOneShot(g, "models", json::object(), [](const json& r) {
      std::string out = "models in " + r.value("models_dir", "");
      if (!r.value("builtin_models_dir", "").empty()) {
        out += " and " + r.value("builtin_models_dir", "") + " (built in)";
      }
      out += ":\n";
      for (const json& name : r.value("available", json::array())) {
        out += "  " + name.get<std::string>() + "\n";
      }
      if (!r.value("default", "").empty()) out += "default: " + r.value("default", "") + "\n";
      out += "loaded:";
      const json loaded = r.value("loaded", json::array());
      if (loaded.empty()) out += " none";
      out += "\n";
      for (const json& m : loaded) {
        out += "  " + m.value("name", "") + " (" + m.value("architecture", "") + ", " +
               m.value("dtype", "") + QuantizationSuffix(m.value("quantization", "none")) + " on " +
               m.value("device", "") + ", " + FormatBytes(m.value("parameter_bytes", int64_t{0})) +
               ")\n";
      }
      return out;
    });
  };
}

Action SetUpLoad(CLI::App& sub, const GlobalOptions& g) {
  auto model = std::make_shared<std::string>();
  auto adapter = std::make_shared<std::string>();
  sub.add_option("model", *model, "Model name or path")->required();
  sub.add_option("--adapter", *adapter, "PEFT LoRA adapter name or path");
  return [&g, model, adapter] {
    return RunOneShot(g, "load", ToParams(LoadRequest{{*model, *adapter}}), [](const json& r) {
      const auto loaded = r.get<LoadResult>();
      return "loaded " + loaded.model + " (" + loaded.dtype + " on " + loaded.device + ")\n";
    });
  };
}

Action SetUpUnload(CLI::App& sub, const GlobalOptions& g) {
  auto model = std::make_shared<std::string>();
  sub.add_option("model", *model, "Loaded model name")->required();
  return [&g, model] {
    return RunOneShot(g, "unload", {{"model", *model}},
                      [](const json& r) { return "unloaded " + r.value("model", "") + "\n"; });
  };
}

// TEXT, or stdin for "-".
std::string ArgOrStdin(const std::string& arg) {
  if (arg != "-") return arg;
  std::stringstream ss;
  ss << std::cin.rdbuf();
  return ss.str();
}

Action SetUpTokenize(CLI::App& sub, const GlobalOptions& g) {
  auto text = std::make_shared<std::string>();
  auto model = std::make_shared<std::string>();
  auto no_special = std::make_shared<bool>(false);
  sub.add_option("text", *text, "Text to tokenize; - reads stdin")->required();
  sub.add_option("--model", *model, "Model name or path (default: the daemon's)");
  sub.add_flag("--no-special", *no_special, "Do not add special tokens such as BOS");
  return [&g, text, model, no_special] {
    const TokenizeRequest request{{*model, ""}, ArgOrStdin(*text), !*no_special};
    return RunOneShot(g, "tokenize", ToParams(request), [](const json& r) {
      std::string out;
      const auto tokens = r.get<TokenizeResult>();
      for (size_t i = 0; i < tokens.ids.size() && i < tokens.tokens.size(); ++i) {
        out += std::to_string(tokens.ids[i]) + "\t" + json(tokens.tokens[i]).dump() + "\n";
      }
      return out;
    });
  };
}

Action SetUpTemplate(CLI::App& sub, const GlobalOptions& g) {
  auto file = std::make_shared<std::string>();
  auto model = std::make_shared<std::string>();
  auto no_prompt = std::make_shared<bool>(false);
  sub.add_option("messages", *file,
                 "JSON file: an array of {role, content}, or an object with messages, tools and "
                 "template variables; - reads stdin")
      ->required();
  sub.add_option("--model", *model, "Model name or path (default: the daemon's)");
  sub.add_flag("--no-generation-prompt", *no_prompt, "Do not open an assistant turn at the end");
  return [&g, file, model, no_prompt] {
    std::string text;
    if (*file == "-") {
      text = ArgOrStdin("-");
    } else {
      std::ifstream in(*file);
      if (!in) return ReportError(Error(ErrorCode::kInvalidRequest, "cannot read " + *file));
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    // Ordered: the template sees messages, tools and kwargs in the file's order.
    using ordered = nlohmann::ordered_json;
    ordered doc = ordered::parse(text, nullptr, false);
    if (doc.is_discarded() || !(doc.is_array() || doc.is_object())) {
      return ReportError(Error(ErrorCode::kInvalidRequest,
                               *file + " is not a JSON array of messages or an object"));
    }
    ordered params = ordered::object();
    if (doc.is_array()) {
      params["messages"] = doc;
    } else {
      ordered kwargs = ordered::object();
      for (auto& [key, value] : doc.items()) {
        if (key == "messages" || key == "tools") {
          params[key] = value;
        } else {
          kwargs[key] = value;
        }
      }
      if (!kwargs.empty()) params["template_kwargs"] = kwargs;
    }
    params["add_generation_prompt"] = !*no_prompt;
    if (!model->empty()) params["model"] = *model;
    return RunOneShot(g, "apply-template", params,
                      [](const json& r) { return r.value("prompt", ""); });
  };
}

Action SetUpMetrics(CLI::App&, const GlobalOptions& g) {
  return [&g] {
    return RunOneShot(g, "metrics", json::object(),
                      [](const json& r) { return r.value("text", ""); });
  };
}

constexpr CommandSpec kCommands[] = {
    {"health", "Show the daemon's status, memory and limits; exit 0 when ready", &SetUpHealth},
    {"queue", "Show running and waiting jobs", &SetUpQueue},
    {"cleanup-memory", "Free cached GPU and host memory now", &SetUpCleanup},
    {"version", "Show the versions of medq and of the daemon", &SetUpVersion},
    {"generate", "Generate text from a prompt, streaming it as it comes", &SetUpGenerate},
    {"embed", "Embed texts with an embedding model; print the vectors", &SetUpEmbed},
    {"cancel", "Cancel a waiting or running job", &SetUpCancel},
    {"submit", "Queue a generation as a job; print its id and return at once", &SetUpSubmit},
    {"status", "Show a submitted job's state", &SetUpStatus},
    {"result", "Print a job's result (--wait: when it finishes)", &SetUpResult},
    {"forget", "Delete a job and its result now", &SetUpForget},
    {"models", "List available and loaded models", &SetUpModels},
    {"load", "Load a model now", &SetUpLoad},
    {"unload", "Unload a loaded model", &SetUpUnload},
    {"metrics", "Print Prometheus metrics (text exposition format)", &SetUpMetrics},
    {"tokenize", "Show the token ids and strings of a text", &SetUpTokenize},
    {"template", "Show the prompt the chat template makes of a conversation", &SetUpTemplate},
};

}  // namespace

std::span<const CommandSpec> Commands() {
  return kCommands;
}

}  // namespace medq::cli
