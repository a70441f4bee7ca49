#include "cli/generate.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "common/generate_params.h"
#include "common/messages.h"

namespace medq::cli {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<int> g_interrupts{0};

void OnInterrupt(int) {
  if (++g_interrupts >= 2) _exit(130);  // a second Ctrl-C does not wait for the daemon
}

struct GenerateFlags {
  std::string prompt;
  std::string file;
  bool chat = false;
  bool raw = false;
  bool json = false;
  bool no_stream = false;
  bool ids = false;
  bool verbose = false;
  GenerateParams params;
  double queue_timeout_s = 0;
  std::optional<uint64_t> seed;
  std::string json_schema;  // --json-schema FILE
  bool json_object = false;
};

// --json-schema FILE (a JSON Schema) or --json-object as the request's
// response_format, checked here as the daemon checks it.
Result<ResponseFormat> ReadResponseFormat(const GenerateFlags& f) {
  if (f.json_object) {
    ResponseFormat format;
    format.type = ResponseFormat::Type::kJsonObject;
    return format;
  }
  std::ifstream in(f.json_schema, std::ios::binary);
  if (!in) return Error(ErrorCode::kInvalidRequest, "cannot read --json-schema " + f.json_schema);
  std::stringstream ss;
  ss << in.rdbuf();
  auto schema = nlohmann::ordered_json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded() || !schema.is_object()) {
    return Error(ErrorCode::kInvalidRequest,
                 "--json-schema " + f.json_schema + " is not a JSON object (a JSON Schema)");
  }
  if (Status st = CheckSupportedSchema(schema, "--json-schema " + f.json_schema); !st.ok()) {
    return st.error();
  }
  ResponseFormat format;
  format.type = ResponseFormat::Type::kJsonSchema;
  format.name = std::filesystem::path(f.json_schema).stem().string();
  format.schema = std::move(schema);
  return format;
}

Result<std::string> ReadPrompt(const GenerateFlags& f) {
  if (!f.file.empty()) {
    std::ifstream in(f.file, std::ios::binary);
    if (!in) return Error(ErrorCode::kInvalidRequest, "cannot read --file " + f.file);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  if (f.prompt == "-" || (f.prompt.empty() && isatty(STDIN_FILENO) == 0)) {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  if (f.prompt.empty()) {
    return Error(ErrorCode::kInvalidRequest,
                 "no prompt: give it as an argument, as - for stdin, "
                 "or with --file");
  }
  return f.prompt;
}

// Shows the queue position on a terminal's stderr, on one line rewritten in
// place; Clear() removes it before text is printed.
class StatusLine {
 public:
  StatusLine() : tty_(isatty(STDERR_FILENO) != 0) {}
  void Show(const std::string& text) {
    if (!tty_) return;
    std::cerr << "\r\033[K" << text << std::flush;
    shown_ = true;
  }
  void Clear() {
    if (!shown_) return;
    std::cerr << "\r\033[K" << std::flush;
    shown_ = false;
  }

 private:
  bool tty_;
  bool shown_ = false;
};

// Fills the params from the flags that generate and submit share: the
// prompt (argument, stdin or --file), the mode, the queue timeout. Returns
// an exit status on a usage error, nullopt when the params are ready.
std::optional<int> PrepareParams(GenerateFlags& f) {
  if (f.chat && f.raw) {
    std::cerr << "medq: --chat and --raw exclude each other\n";
    return kExitUsage;
  }
  GenerateParams& p = f.params;
  if (!p.prompt_ids) {
    auto prompt = ReadPrompt(f);
    if (!prompt.ok()) return ReportError(prompt.error());
    p.prompt = std::move(*prompt);
  }
  p.mode = f.chat ? PromptMode::kChat : f.raw ? PromptMode::kRaw : PromptMode::kAuto;
  if (f.queue_timeout_s > 0) p.queue_timeout_s = f.queue_timeout_s;
  if (!f.json_schema.empty() && f.json_object) {
    std::cerr << "medq: --json-schema and --json-object exclude each other\n";
    return kExitUsage;
  }
  if (!f.json_schema.empty() || f.json_object) {
    auto format = ReadResponseFormat(f);
    if (!format.ok()) return ReportError(format.error());
    p.response_format = std::move(*format);
  }
  return std::nullopt;
}

int Run(const GlobalOptions& g, GenerateFlags& f) {
  if (auto status = PrepareParams(f)) return *status;
  f.json = f.json || g.json;
  GenerateParams& p = f.params;
  p.return_ids = f.ids || f.json;
  if (p.logprobs && !f.json) {
    std::cerr << "medq: --logprobs needs --json (the log-probabilities are in its output)\n";
    return kExitUsage;
  }

  auto client = ConnectToDaemon(g);
  if (!client.ok()) return ReportUnreachable(client.error());
  auto request_id = client->Send("generate", ToJson(p));
  if (!request_id.ok()) return ReportUnreachable(request_id.error());

  struct sigaction sa {};
  sa.sa_handler = OnInterrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  StatusLine status;
  std::string text;
  std::vector<int32_t> ids;
  std::vector<TokenLogprob> logprobs;
  std::string job;
  bool cancel_sent = false;
  const auto t0 = Clock::now();
  std::optional<double> first_token_ms;
  const bool stream = !f.no_stream && !f.json;
  for (;;) {
    if (g_interrupts > 0 && !cancel_sent && !job.empty()) {
      cancel_sent = true;
      status.Clear();
      auto sent = client->Send("cancel", {{"job", job}});
      if (!sent.ok()) return 130;
    }
    auto reply = client->ReadReply(std::chrono::milliseconds(100));
    if (!reply.ok()) {
      if (reply.error().code == ErrorCode::kQueueTimeout) continue;  // just our poll interval
      status.Clear();
      return ReportUnreachable(reply.error());
    }
    if (reply->value("id", json()) != json(*request_id)) {
      if (auto error = ipc::ErrorOf(*reply); error && reply->value("id", json()).is_null()) {
        status.Clear();
        return ReportError(*error);
      }
      continue;  // the cancel op's own reply
    }
    const std::string event = reply->value("event", "");
    if (const std::optional<GenerateEvent> typed = GenerateEventOf(*reply)) {
      if (const auto* queued = std::get_if<QueuedEvent>(&*typed)) {
        job = queued->job;
        std::ostringstream line;
        line << "queued: " << queued->position << " of " << queued->queue_length << ", ~"
             << static_cast<int>(std::ceil(queued->estimated_wait_s)) << " s";
        status.Show(line.str());
      } else if (const auto* started = std::get_if<StartedEvent>(&*typed)) {
        job = started->job;
        status.Clear();
      } else if (const auto* token = std::get_if<TokenEvent>(&*typed)) {
        if (!first_token_ms) {
          first_token_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        }
        text += token->text;
        ids.insert(ids.end(), token->ids.begin(), token->ids.end());
        logprobs.insert(logprobs.end(), token->logprobs.begin(), token->logprobs.end());
        if (stream && !f.ids) std::cout << token->text << std::flush;
      }
    } else if (event == "error") {
      status.Clear();
      if (stream && !text.empty()) std::cout << "\n";
      return ReportError(DecodeError(*reply));
    } else if (event == "done") {
      status.Clear();
      const GenerateDone done = reply->get<GenerateDone>();
      if (f.json) {
        json result = {{"text", text},
                       {"finish_reason", done.finish_reason},
                       {"model", done.model},
                       {"usage", done.usage},
                       {"timings", done.timings},
                       {"ids", ids}};
        if (f.params.logprobs) result["logprobs"] = logprobs;
        if (first_token_ms) result["timings"]["first_token_ms"] = *first_token_ms;
        std::cout << result.dump() << "\n";
      } else if (f.ids) {
        for (size_t i = 0; i < ids.size(); ++i)
          std::cout << (i ? " " : "") << ids[i];
        std::cout << "\n";
      } else {
        if (!stream) std::cout << text;
        if (!text.empty() && text.back() != '\n') std::cout << "\n";
      }
      std::cout << std::flush;
      if (f.verbose) {
        const double decode_ms = done.timings.decode_ms;
        const int64_t generated = done.usage.completion_tokens;
        std::cerr << "prompt " << done.usage.prompt_tokens << " tokens, generated " << generated
                  << " tokens (" << FinishReasonName(done.finish_reason) << "), first token "
                  << static_cast<int>(first_token_ms.value_or(0)) << " ms, "
                  << (decode_ms > 0 ? std::round(10 * static_cast<double>(generated - 1) /
                                                 (decode_ms / 1000)) /
                                          10
                                    : 0)
                  << " tokens/s\n";
      }
      return done.finish_reason == FinishReason::kCancelled ? 130 : kExitOk;
    }
  }
}

// Queues the generation as a job and prints its id (docs/protocol.md,
// submit): the client does not wait; `medq result JOB` fetches the text.
int RunSubmit(const GlobalOptions& g, GenerateFlags& f) {
  if (auto status = PrepareParams(f)) return *status;
  return RunOneShot(g, "submit", {{"op", "generate"}, {"params", ToJson(f.params)}},
                    [](const json& r) { return r.value("job", "") + "\n"; });
}

// The flags generate and submit share; `prompt_ids` is read after parsing.
void AddGenerateFlags(CLI::App& sub, GenerateFlags& f, std::vector<int32_t>& prompt_ids) {
  GenerateParams& p = f.params;
  sub.add_option("prompt", f.prompt, "The prompt; - reads it from stdin");
  sub.add_option("--file", f.file, "Read the prompt from a file");
  sub.add_flag("--chat", f.chat,
               "Render the prompt with the model's chat template (default when it has one)");
  sub.add_flag("--raw", f.raw, "Send the prompt as is, without the chat template");
  sub.add_option("--system", p.system, "System message for --chat");
  sub.add_option("--model", p.model, "Model name (in the daemon's models directory) or path");
  sub.add_option("--adapter", p.adapter, "PEFT LoRA adapter name or path");
  sub.add_option("--max-tokens", p.max_tokens,
                 "Most tokens to generate (default 256, or what the model's context leaves)")
      ->check(CLI::Range(1, kMaxNewTokensLimit));
  sub.add_option("--temperature", p.temperature, "Sampling temperature; 0 is greedy")
      ->check(CLI::Range(0.0, 100.0));
  sub.add_option("--top-k", p.top_k, "Sample among the k most likely tokens; 0 is off")
      ->check(CLI::NonNegativeNumber);
  sub.add_option("--top-p", p.top_p, "Nucleus sampling threshold; 1 is off")
      ->check(CLI::Range(0.0, 1.0));
  sub.add_option("--min-p", p.min_p, "Drop tokens below min-p times the top probability")
      ->check(CLI::Range(0.0, 1.0));
  sub.add_option("--repeat-penalty", p.repeat_penalty, "Repetition penalty; 1 is off")
      ->check(CLI::PositiveNumber);
  sub.add_option("--seed", p.seed, "Random seed: the same seed gives the same text");
  sub.add_option("--stop", p.stop, "Stop when this text appears (repeatable)");
  sub.add_option("--priority", p.priority, "Queue priority: high, normal or low")
      ->check(CLI::IsMember({"high", "normal", "low"}));
  sub.add_option("--timeout", f.queue_timeout_s,
                 "Longest wait in the queue, in seconds (at most the daemon's queue_timeout_s)")
      ->check(CLI::PositiveNumber);
  sub.add_option("--deadline", p.timeout_s,
                 "Longest the request may take, queue wait plus generation, in seconds; past it "
                 "the job stops and ends with TIMEOUT, keeping the text it produced")
      ->check(CLI::PositiveNumber);
  sub.add_option("--prompt-ids", prompt_ids, "Send these token ids as the prompt")->delimiter(',');
  sub.add_option("--json-schema", f.json_schema,
                 "Answer with a JSON document valid under the JSON Schema in this file, "
                 "enforced token by token (structured output)");
  sub.add_flag("--json-object", f.json_object, "Answer with a JSON object (any properties)");
}

// --logprobs N: each token's log-probability and the N most likely tokens,
// in --json's output (generate only: a submitted job keeps its text).
void AddLogprobsFlag(CLI::App& sub, GenerateFlags& f) {
  sub.add_option("--logprobs", f.params.logprobs,
                 "With --json: each token's log-probability and those of the N most likely "
                 "tokens at its place (0 to 20)")
      ->check(CLI::Range(0, kMaxLogprobs));
}

}  // namespace

Action SetUpGenerate(CLI::App& sub, const GlobalOptions& g) {
  auto f = std::make_shared<GenerateFlags>();
  auto prompt_ids = std::make_shared<std::vector<int32_t>>();
  AddGenerateFlags(sub, *f, *prompt_ids);
  sub.add_flag("--json", f->json,
               "Print one JSON object at the end: text, finish reason, token counts, timings");
  sub.add_flag("--no-stream", f->no_stream, "Print the text at the end instead of as it comes");
  sub.add_flag("--ids", f->ids, "Print the generated token ids instead of text");
  AddLogprobsFlag(sub, *f);
  sub.add_flag("-v,--verbose", f->verbose,
               "Finish with a line on stderr: token counts, time to first token, tokens/s");
  return [&g, f, prompt_ids] {
    if (!prompt_ids->empty()) f->params.prompt_ids = *prompt_ids;
    return Run(g, *f);
  };
}

Action SetUpSubmit(CLI::App& sub, const GlobalOptions& g) {
  auto f = std::make_shared<GenerateFlags>();
  auto prompt_ids = std::make_shared<std::vector<int32_t>>();
  AddGenerateFlags(sub, *f, *prompt_ids);
  return [&g, f, prompt_ids] {
    if (!prompt_ids->empty()) f->params.prompt_ids = *prompt_ids;
    return RunSubmit(g, *f);
  };
}

}  // namespace medq::cli
