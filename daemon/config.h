// The daemon's configuration: flags > MEDQ_* environment > config file >
// defaults. Every key is listed once, in config.cc's table, which also feeds
// --help, --print-config and the man page.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "common/result.h"
#include "daemon/model_resolver.h"

namespace CLI {
class App;
}

namespace medq::daemon {

struct Config {
  std::string config_file;  // the file read, empty when none
  std::string socket;
  std::string socket_group = "medq";  // members may use the daemon
  std::string log_level = "info";
  int max_connections = 256;
  int64_t max_message_bytes = 16 << 20;
  double idle_timeout_s = 60;
  double drain_timeout_s = 30;
  int max_queue = 0;  // 0: chosen from the device's memory at start
  double queue_timeout_s = 300;
  double request_timeout_s = 0;    // every request's deadline (queue + run); 0: none
  int breaker_errors = 3;          // device errors in a row that pause a model; 0: never
  double breaker_cooldown_s = 30;  // how long a paused model refuses work before a probe
  int max_concurrent = 1;          // generations decoded at once; 1: the generation lock
  int prefill_chunk_tokens = 512;  // prompt tokens read per step
  int batch_wait_ms = 5;           // an idle worker's wait for the next generation to start with
  int threads = 0;                 // CPU threads of the engine's kernels; 0: one per core
  double aging_s = 60;             // a waiting job moves up one priority class per aging_s

  // Models.
  std::string models_dir;                 // names resolve here (default: per-user or service dir)
  bool allow_model_paths = false;         // also accept absolute model/adapter paths
  std::string model = kBuiltinModelName;  // used when a request names none
  std::string preload;                    // loaded at start; `ready` waits for it
  std::string device = "auto";            // auto (CUDA when available), cpu, cuda:N
  std::string dtype = "auto";             // auto, bf16, fp16, fp32
  std::string quantize = "none";          // projections: none, int8 or int4 (CPU)
  bool quantize_embeddings = false;       // with quantize: lm_head and embeddings too
  std::string gpu_fallback = "cpu";       // on CUDA OOM while loading: cpu or none
  int max_loaded_models = 1;
  double keep_alive_s = 300;           // unload a model idle this long; 0 keeps it
  std::string cleanup = "after-each";  // after-each, idle or never
  int64_t max_gpu_memory_mb = 0;       // a generation's GPU budget; 0: the device's free memory

  // Durable jobs (daemon/store/): accepted jobs and results in
  // <state_dir>/jobs.db; "none" keeps no store.
  std::string state_dir;
  double result_ttl_s = 3600;  // a finished job's result is kept this long

  // Embeddings.
  std::string embed_model;          // used when an embed request names none
  int embed_max_batch = 32;         // texts per forward pass
  int embed_batch_timeout_ms = 10;  // longest a text waits for its batch to fill
  double embed_max_padding = 0.25;  // most of a batch's token slots that may be padding
  int embed_max_concurrent = 64;    // embed requests in the batcher at once
  int embed_max_inputs = 2048;      // texts in one embed request

  // The OpenAI-compatible HTTP endpoint (daemon/http/, docs/http.md).
  std::string http_listen;         // "" (off), HOST:PORT or a Unix socket path
  std::string http_api_keys_file;  // Bearer keys, one a line; required off loopback

  // Privacy: prompts and outputs are patient data, never logged unless this is on.
  bool log_prompts = false;

  // Testing: enables the inject-fault op (command line only).
  bool test_fault_injection = false;
  // Testing: models on the CPU take the GPU's device loop (command line only;
  // engine::SetDeviceLoopOnCpu).
  bool test_device_loop_on_cpu = false;
};

// What LoadConfig decided: run with a Config, or exit now with a status
// (after --help, --version or --print-config, or on a configuration error,
// whose message has been printed to stderr).
struct ExitNow {
  int status = 0;
};
using ConfigOutcome = std::variant<Config, ExitNow>;

// Parses argv, the MEDQ_* environment and the config file. A value that is
// invalid is refused with a message naming its key and where it came from.
ConfigOutcome LoadConfig(int argc, const char* const* argv);

// Reads the text of a configuration file alone, as LoadConfig reads the file
// --config names (key = value lines, the same keys and checks), without flags,
// environment or defaults that depend on the machine: keys the text leaves out
// keep Config's defaults. Failure: kInvalidRequest with the parser's message (a
// misspelt key, a value of the wrong type or out of range). Never throws. For
// tests and the fuzz target; medqd reads its file through LoadConfig.
Result<Config> ParseConfigText(std::string_view text);

// ParseConfigText for many texts: the option table (CLI11's, which costs far
// more to build than a short file costs to read) is built once, and cleared
// before each text, which then reads as ParseConfigText reads it. For the fuzz
// target, which feeds it millions of texts. One thread at a time.
class ConfigTextParser {
 public:
  ConfigTextParser();
  ~ConfigTextParser();
  ConfigTextParser(const ConfigTextParser&) = delete;
  ConfigTextParser& operator=(const ConfigTextParser&) = delete;

  Result<Config> Parse(std::string_view text);

 private:
  Config fields_;  // the option table writes here; reset before each text
  std::unique_ptr<CLI::App> app_;
};

// The effective configuration in the config-file format.
std::string FormatConfig(const Config& config);

}  // namespace medq::daemon
