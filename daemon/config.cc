#include "daemon/config.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "common/version.h"
#include "daemon/http_address.h"
#include "ipc/socket_path.h"

namespace medq::daemon {
namespace {

constexpr const char* kDefaultConfigFile = "/etc/medq/medqd.conf";

// "max_queue" -> "--max-queue,--max_queue": dashes for people, underscores
// for the config file (CLI11 matches file keys against long option names).
std::string OptionNames(const std::string& key) {
  std::string dashed = key;
  std::replace(dashed.begin(), dashed.end(), '_', '-');
  return dashed == key ? "--" + key : "--" + dashed + ",--" + key;
}

std::string EnvName(const std::string& key) {
  std::string env = "MEDQ_" + key;
  std::transform(env.begin(), env.end(), env.begin(),
                 [](unsigned char c) { return std::toupper(c); });
  return env;
}

// Adds one configuration key: a flag, its MEDQ_* variable and its file key.
template <typename T>
CLI::Option* AddKey(CLI::App& app, const std::string& key, T& field, const std::string& help) {
  return app.add_option(OptionNames(key), field, help + " [env " + EnvName(key) + "]")
      ->capture_default_str();
}

bool GivenOnCommandLine(const std::vector<std::string>& args, const CLI::Option& opt) {
  for (const std::string& name : opt.get_lnames()) {
    const std::string flag = "--" + name;
    for (const std::string& a : args) {
      if (a == flag || a.rfind(flag + "=", 0) == 0) return true;
    }
  }
  return false;
}

// quantize: none, int8 or int4.
CLI::Validator QuantizeValidator() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value == "none" || value == "int8" || value == "int4") return "";
        return "quantize '" + value + "' is not one of none, int8, int4";
      },
      "none|int8|int4");
}

}  // namespace

namespace {

// The service keeps models under its StateDirectory; a user daemon under
// ~/.local/share/medq/models. Absolute model paths are allowed by default
// only for a user daemon, whose user can read those files anyway.
std::string DefaultModelsDir() {
  if (const char* state = std::getenv("STATE_DIRECTORY"); state != nullptr && *state) {
    std::string dir = state;
    return dir.substr(0, dir.find(':')) + "/models";
  }
  if (getuid() == 0) return "/var/lib/medq/models";
  if (const char* data = std::getenv("XDG_DATA_HOME"); data != nullptr && *data) {
    return std::string(data) + "/medq/models";
  }
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.local/share/medq/models";
}

// The job store: the service's StateDirectory, else $XDG_STATE_HOME/medq
// when set, else /var/lib/medq for root, else ~/.local/state/medq.
std::string DefaultStateDir() {
  if (const char* state = std::getenv("STATE_DIRECTORY"); state != nullptr && *state) {
    std::string dir = state;
    return dir.substr(0, dir.find(':'));
  }
  if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && *xdg) {
    return std::string(xdg) + "/medq";
  }
  if (getuid() == 0) return "/var/lib/medq";
  const char* home = std::getenv("HOME");
  return std::string(home != nullptr ? home : "") + "/.local/state/medq";
}

bool DefaultAllowModelPaths() {
  const char* state = std::getenv("STATE_DIRECTORY");
  return getuid() != 0 && (state == nullptr || *state == '\0');
}

// The configuration keys, each a flag, a MEDQ_* variable and a file key;
// keep docs (man/medqd.conf.5) in step.
void AddConfigKeys(CLI::App& app, Config& c) {
  AddKey(app, "socket", c.socket, "Unix socket to listen on");
  AddKey(app, "socket_group", c.socket_group,
         "Group whose members may use the daemon (besides its own user and root)");
  AddKey(app, "log_level", c.log_level, "trace, debug, info, warn, error or off")
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "off"}));
  AddKey(app, "max_connections", c.max_connections, "Most client connections at once")
      ->check(CLI::Range(1, 100000));
  AddKey(app, "max_message_bytes", c.max_message_bytes, "Largest request line, in bytes")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 32));
  AddKey(app, "idle_timeout_s", c.idle_timeout_s,
         "Close a connection that sends nothing for this long while it has no request in "
         "flight, or stalls in the middle of a line")
      ->check(CLI::Range(0.1, 86400.0));
  AddKey(app, "drain_timeout_s", c.drain_timeout_s,
         "On SIGTERM, how long in-flight work may take to finish")
      ->check(CLI::Range(0.0, 3600.0));
  AddKey(app, "max_queue", c.max_queue,
         "Most jobs waiting for the worker; 0 picks 5 for GPUs up to 8 GB, else 20")
      ->check(CLI::Range(0, 100000));
  AddKey(app, "queue_timeout_s", c.queue_timeout_s, "Longest a job may wait in the queue")
      ->check(CLI::Range(0.1, 86400.0));
  AddKey(app, "request_timeout_s", c.request_timeout_s,
         "Every generate and embed request's deadline, queue wait plus run (a request's own "
         "timeout_s may be shorter); past it the job ends with TIMEOUT; 0 sets none")
      ->check(CLI::Range(0.0, 86400.0 * 7));
  AddKey(app, "breaker_errors", c.breaker_errors,
         "Device errors in a row (requests ending INTERNAL) after which a model stops taking "
         "work for breaker_cooldown_s (circuit breaker); 0 never stops it")
      ->check(CLI::Range(0, 1000000));
  AddKey(app, "breaker_cooldown_s", c.breaker_cooldown_s,
         "How long a model paused by its circuit breaker refuses work (NOT_READY) before one "
         "request probes it")
      ->check(CLI::Range(0.1, 86400.0));
  AddKey(app, "max_concurrent", c.max_concurrent,
         "Generations decoded at once, in one batch; 1 is the generation lock (one at a "
         "time, the rest wait in the queue)")
      ->check(CLI::Range(1, 256));
  AddKey(app, "prefill_chunk_tokens", c.prefill_chunk_tokens,
         "Prompt tokens read per step, so that running generations keep producing tokens "
         "while a long prompt is read")
      ->check(CLI::Range(1, 1 << 20));
  AddKey(app, "batch_wait_ms", c.batch_wait_ms,
         "With max_concurrent above 1: how long a generation that finds none running waits "
         "for another to start with it, anew after each that comes, so that generations sent "
         "together read their prompts in one step; 0 starts it at once")
      ->check(CLI::Range(0, 10000));
  AddKey(app, "threads", c.threads, "CPU threads of the engine's kernels; 0 uses every core")
      ->check(CLI::Range(0, 1024));
  AddKey(app, "aging_s", c.aging_s,
         "A waiting job moves up one priority class for every this many seconds it waits")
      ->check(CLI::Range(0.0, 86400.0));
  AddKey(app, "models_dir", c.models_dir, "Where model and adapter names are looked up");
  AddKey(app, "allow_model_paths", c.allow_model_paths,
         "Also accept absolute model and adapter paths (true for a user daemon)");
  AddKey(app, "model", c.model, "The model used when a request names none (name or path)");
  AddKey(app, "preload", c.preload, "A model to load at start; ready waits for it");
  AddKey(app, "device", c.device, "auto (CUDA when available), cpu or cuda:N");
  AddKey(app, "dtype", c.dtype,
         "Weight dtype: auto (the checkpoint's; fp16 is fp32 on CPU), bf16, fp16 or fp32")
      ->check(CLI::IsMember({"auto", "bf16", "fp16", "fp32"}));
  AddKey(app, "quantize", c.quantize,
         "Weight-only quantization of generation models' projection matrices: none, int8 "
         "(one scale per row) or int4 (groups of 64 weights with a scale and minimum each); CPU "
         "only for now; embeddings and lm_head keep dtype unless quantize_embeddings")
      ->check(QuantizeValidator());
  AddKey(app, "quantize_embeddings", c.quantize_embeddings,
         "With quantize int8 or int4: hold lm_head and the input embeddings (one matrix when "
         "tied) in the same format too; faster decoding and fewer bytes, at a further cost in "
         "accuracy");
  AddKey(app, "gpu_fallback", c.gpu_fallback,
         "On CUDA out-of-memory while loading a model: cpu (load it on the CPU) or none (GPU_OOM)")
      ->check(CLI::IsMember({"cpu", "none"}));
  AddKey(app, "max_loaded_models", c.max_loaded_models,
         "Models kept loaded at once; the least recently used is unloaded")
      ->check(CLI::Range(1, 64));
  AddKey(app, "keep_alive_s", c.keep_alive_s, "Unload a model unused this long; 0 keeps it")
      ->check(CLI::Range(0.0, 1e7));
  AddKey(app, "cleanup", c.cleanup,
         "Memory cleanup: after-each job, when idle, or never (weights always stay)")
      ->check(CLI::IsMember({"after-each", "idle", "never"}));
  AddKey(app, "max_gpu_memory_mb", c.max_gpu_memory_mb,
         "Memory budget, in MiB, on the GPU a model runs on: weights held plus a generation's "
         "estimated KV cache and activations; a generation that does not fit gets "
         "INSUFFICIENT_MEMORY. 0: only the GPU's free memory limits")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  AddKey(app, "state_dir", c.state_dir,
         "Where the job store (jobs.db) keeps accepted jobs and their results, so that they "
         "survive a crash; \"none\" keeps no store");
  AddKey(app, "result_ttl_s", c.result_ttl_s,
         "How long a finished job's result is kept for `medq result`")
      ->check(CLI::Range(1.0, 1e8));
  AddKey(app, "embed_model", c.embed_model,
         "The embedding model used when an embed request names none (name or path)");
  AddKey(app, "embed_max_batch", c.embed_max_batch,
         "Texts embedded in one forward pass, from one request or several")
      ->check(CLI::Range(1, 4096));
  AddKey(app, "embed_batch_timeout_ms", c.embed_batch_timeout_ms,
         "Longest a text waits for its batch to fill before the batch runs as it is")
      ->check(CLI::Range(0, 60000));
  AddKey(app, "embed_max_padding", c.embed_max_padding,
         "Most of a batch's token slots that may be padding: texts of very different lengths "
         "go in different batches")
      ->check(CLI::Range(0.0, 0.95));
  AddKey(app, "embed_max_concurrent", c.embed_max_concurrent,
         "Embed requests in the batcher at once; more wait in the embed queue")
      ->check(CLI::Range(1, 100000));
  AddKey(app, "embed_max_inputs", c.embed_max_inputs, "Most texts in one embed request")
      ->check(CLI::Range(1, 1 << 20));
  AddKey(app, "http_listen", c.http_listen,
         "Serve the OpenAI-compatible HTTP API on HOST:PORT (e.g. 127.0.0.1:8090) or on a Unix "
         "socket path; empty (the default) leaves it off");
  AddKey(app, "http_api_keys_file", c.http_api_keys_file,
         "File of Bearer keys (one a line) the HTTP API requires; needed to listen on an address "
         "other than loopback; reloaded on SIGHUP");
  AddKey(app, "log_prompts", c.log_prompts,
         "Debugging only: log every generation's prompt and output, which are patient data "
         "(a warning is logged at start)");
}

}  // namespace

ConfigOutcome LoadConfig(int argc, const char* const* argv) {
  Config c;
  c.socket = ipc::DefaultDaemonSocketPath();
  c.models_dir = DefaultModelsDir();
  c.state_dir = DefaultStateDir();
  c.allow_model_paths = DefaultAllowModelPaths();
  bool print_config = false;

  CLI::App app{
      "medqd: the medq inference daemon. It owns the GPU, the model cache and the "
      "generation queue, and serves `medq` over a Unix socket.",
      "medqd"};
  app.set_version_flag("--version", std::string("medqd ") + kVersion);
  app.set_config("--config", kDefaultConfigFile,
                 "Configuration file (key = value lines) [env MEDQ_CONFIG]");
  app.allow_config_extras(CLI::config_extras_mode::error);  // a misspelt key is an error
  app.add_flag("--print-config", print_config, "Print the effective configuration and exit");
  app.add_flag("--test-fault-injection", c.test_fault_injection,
               "Testing only: enable the inject-fault op, which makes the next model load or "
               "decode step fail as if the GPU ran out of memory, and apply max_gpu_memory_mb "
               "to models on the CPU too");
  app.add_flag("--test-device-loop-on-cpu", c.test_device_loop_on_cpu,
               "Testing only: models on the CPU take the loop a GPU takes (the sampler and the "
               "fed-back ids on tensors, the static decode step that CUDA captures as a graph), "
               "so that it is checked on a machine without a GPU")
      ->configurable(false);  // command line only: no file or variable turns it on

  AddConfigKeys(app, c);

  // Precedence flags > environment > file: a MEDQ_* variable becomes a flag
  // unless the same flag is on the command line; flags always beat the file.
  std::vector<std::string> args(argv + 1, argv + argc);
  std::vector<std::string> with_env = args;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_lnames().empty() || opt->get_lnames()[0] == "help") continue;
    std::string key = opt->get_lnames().back();
    if (key == "version" || key == "print-config" || key == "test-fault-injection" ||
        key == "test-device-loop-on-cpu") {
      continue;
    }
    const char* value = std::getenv(EnvName(key).c_str());
    if (value == nullptr || *value == '\0' || GivenOnCommandLine(args, *opt)) continue;
    with_env.push_back("--" + key + "=" + value);
  }
  std::reverse(with_env.begin(), with_env.end());  // CLI11 wants them reversed
  try {
    app.parse(with_env);
  } catch (const CLI::ParseError& e) {
    int status = app.exit(e);
    return ExitNow{status == 0 ? 0 : 64};
  }
  if (const CLI::Option* cfg = app.get_config_ptr(); cfg != nullptr && cfg->count() > 0) {
    c.config_file = cfg->as<std::string>();
  } else if (access(kDefaultConfigFile, R_OK) == 0) {
    c.config_file = kDefaultConfigFile;
  }
  if (c.socket.empty()) {
    std::cerr << "medqd: socket: must not be empty\n";
    return ExitNow{64};
  }
  if (!c.http_listen.empty()) {
    auto address = http::ParseHttpAddress(c.http_listen);
    if (!address.ok()) {
      std::cerr << "medqd: " << address.error().message << "\n";
      return ExitNow{64};
    }
    if (!http::IsLoopback(*address) && c.http_api_keys_file.empty()) {
      std::cerr << "medqd: http_listen " << c.http_listen
                << " is not a loopback address: set http_api_keys_file too, so that only "
                   "clients with a key may use it\n";
      return ExitNow{64};
    }
  }
  if (print_config) {
    std::cout << FormatConfig(c);
    return ExitNow{0};
  }
  return c;
}

ConfigTextParser::ConfigTextParser()
    : app_(std::make_unique<CLI::App>("medqd configuration file", "medqd")) {
  app_->allow_config_extras(CLI::config_extras_mode::error);  // as LoadConfig's --config
  AddConfigKeys(*app_, fields_);
}

ConfigTextParser::~ConfigTextParser() = default;

Result<Config> ConfigTextParser::Parse(std::string_view text) {
  fields_ = Config{};  // keys the text leaves out keep the defaults
  app_->clear();       // and no result of the last text counts
  std::istringstream in{std::string(text)};
  try {
    app_->parse_from_stream(in);
  } catch (const CLI::ParseError& e) {
    return Error(ErrorCode::kInvalidRequest, e.what());
  }
  return fields_;
}

Result<Config> ParseConfigText(std::string_view text) {
  return ConfigTextParser().Parse(text);
}

std::string FormatConfig(const Config& c) {
  std::ostringstream out;
  out << "# medqd effective configuration";
  if (!c.config_file.empty()) out << " (file: " << c.config_file << ")";
  out << "\n";
  out << "socket = \"" << c.socket << "\"\n";
  out << "socket_group = \"" << c.socket_group << "\"\n";
  out << "log_level = \"" << c.log_level << "\"\n";
  out << "max_connections = " << c.max_connections << "\n";
  out << "max_message_bytes = " << c.max_message_bytes << "\n";
  out << "idle_timeout_s = " << c.idle_timeout_s << "\n";
  out << "drain_timeout_s = " << c.drain_timeout_s << "\n";
  out << "max_queue = " << c.max_queue << "\n";
  out << "queue_timeout_s = " << c.queue_timeout_s << "\n";
  out << "request_timeout_s = " << c.request_timeout_s << "\n";
  out << "breaker_errors = " << c.breaker_errors << "\n";
  out << "breaker_cooldown_s = " << c.breaker_cooldown_s << "\n";
  out << "max_concurrent = " << c.max_concurrent << "\n";
  out << "prefill_chunk_tokens = " << c.prefill_chunk_tokens << "\n";
  out << "batch_wait_ms = " << c.batch_wait_ms << "\n";
  out << "threads = " << c.threads << "\n";
  out << "aging_s = " << c.aging_s << "\n";
  out << "models_dir = \"" << c.models_dir << "\"\n";
  out << "allow_model_paths = " << (c.allow_model_paths ? "true" : "false") << "\n";
  out << "model = \"" << c.model << "\"\n";
  out << "preload = \"" << c.preload << "\"\n";
  out << "device = \"" << c.device << "\"\n";
  out << "dtype = \"" << c.dtype << "\"\n";
  out << "quantize = \"" << c.quantize << "\"\n";
  out << "quantize_embeddings = " << (c.quantize_embeddings ? "true" : "false") << "\n";
  out << "gpu_fallback = \"" << c.gpu_fallback << "\"\n";
  out << "max_loaded_models = " << c.max_loaded_models << "\n";
  out << "keep_alive_s = " << c.keep_alive_s << "\n";
  out << "cleanup = \"" << c.cleanup << "\"\n";
  out << "max_gpu_memory_mb = " << c.max_gpu_memory_mb << "\n";
  out << "state_dir = \"" << c.state_dir << "\"\n";
  out << "result_ttl_s = " << c.result_ttl_s << "\n";
  out << "embed_model = \"" << c.embed_model << "\"\n";
  out << "embed_max_batch = " << c.embed_max_batch << "\n";
  out << "embed_batch_timeout_ms = " << c.embed_batch_timeout_ms << "\n";
  out << "embed_max_padding = " << c.embed_max_padding << "\n";
  out << "embed_max_concurrent = " << c.embed_max_concurrent << "\n";
  out << "embed_max_inputs = " << c.embed_max_inputs << "\n";
  out << "http_listen = \"" << c.http_listen << "\"\n";
  out << "http_api_keys_file = \"" << c.http_api_keys_file << "\"\n";
  out << "log_prompts = " << (c.log_prompts ? "true" : "false") << "\n";
  return out.str();
}

}  // namespace medq::daemon
