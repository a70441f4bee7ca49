// POST /v1/chat/completions and POST /v1/completions: a generation
// (StartGenerateJob, loop/entry_points.h), whose typed events become an OpenAI completion object
// or, with "stream": true, server-sent chat.completion.chunk / text_completion events ending in
// "data: [DONE]".
//
// The response head goes out with the first token (or the end), so that every
// refusal before it (QUEUE_FULL, QUEUE_TIMEOUT, MODEL_NOT_FOUND, a prompt the
// model cannot take, ...) is a proper HTTP error; it carries x-medq-job and
// x-medq-queue-ms (the time until the job started).
#include <algorithm>
#include <chrono>
#include <iterator>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "common/generate_params.h"
#include "common/messages.h"
#include "common/tool_calls.h"
#include "daemon/http/routes.h"
#include "daemon/loop/entry_points.h"

namespace medq::daemon::http {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// One answer's text as it comes (a request with "n" has several).
struct ChoiceText {
  std::string text;
  std::vector<TokenLogprob> held;  // the logprobs of `text` not yet sent
  size_t streamed = 0;             // bytes of `text` a tool-reading stream has sent
  int64_t text_bytes = 0;          // completions' text_offset: bytes of the tokens before
};

// The end of one answer, as `done` gives it.
struct ChoiceEnd {
  std::string finish;
  std::vector<ToolCall> calls;
  std::string content;  // of a turn that made calls: the text outside them
};

struct Translation {
  bool chat = true;
  bool stream = false;
  bool include_usage = false;
  // Tools given and tool_choice not "none": the answer may be calls, which
  // are known only at its end, so a stream sends as content only the text
  // that cannot be part of a call (ToolCallSafePrefix) as it comes, and the
  // rest at the end, as calls or as content.
  bool reads_tool_calls = false;
  // logprobs asked for: chat's "logprobs": true, completions' "logprobs": N.
  bool logprobs = false;
  std::string model;  // as requested, until `done` names the one that ran
  std::string id;
  int64_t created = 0;
  Clock::time_point submitted = Clock::now();
  std::vector<ChoiceText> choices = std::vector<ChoiceText>(1);  // "n" of them

  // OpenAI's logprobs object for `entries` of choice `c`: chat's
  // {"content": [...]}, completions' four parallel arrays (text_offset in
  // bytes of the completion text); null when none were asked for.
  json LogprobsJson(ChoiceText& c, const std::vector<TokenLogprob>& entries) const {
    if (!logprobs) return nullptr;
    if (chat) {
      json content = json::array();
      for (const TokenLogprob& e : entries) {
        json top = json::array();
        for (const TokenCandidate& t : e.top)
          top.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", t.bytes}});
        content.push_back({{"token", e.chosen.token},
                           {"logprob", e.chosen.logprob},
                           {"bytes", e.chosen.bytes},
                           {"top_logprobs", std::move(top)}});
      }
      return {{"content", std::move(content)}, {"refusal", nullptr}};
    }
    json tokens = json::array(), token_logprobs = json::array(), top = json::array(),
         offsets = json::array();
    for (const TokenLogprob& e : entries) {
      tokens.push_back(e.chosen.token);
      token_logprobs.push_back(e.chosen.logprob);
      json alternatives = json::object();
      for (const TokenCandidate& t : e.top)
        alternatives[t.token] = t.logprob;
      top.push_back(std::move(alternatives));
      offsets.push_back(c.text_bytes);
      c.text_bytes += static_cast<int64_t>(e.chosen.bytes.size());
    }
    return {{"tokens", std::move(tokens)},
            {"token_logprobs", std::move(token_logprobs)},
            {"top_logprobs", std::move(top)},
            {"text_offset", std::move(offsets)}};
  }

  json Envelope(const char* object) const {
    return json{{"id", id}, {"object", object}, {"created", created}, {"model", model}};
  }

  json Chunk(size_t index, json delta, json finish_reason, json chunk_logprobs = nullptr) const {
    json c = Envelope(chat ? "chat.completion.chunk" : "text_completion");
    json choice = {{"index", index}};
    if (chat) {
      choice["delta"] = std::move(delta);
    } else {
      choice["text"] = delta.value("content", "");
    }
    choice["logprobs"] = std::move(chunk_logprobs);
    choice["finish_reason"] = std::move(finish_reason);
    c["choices"] = json::array({std::move(choice)});
    return c;
  }

  void OnEvent(HttpExchange& ex, const GenerateEvent& event) {
    if (const auto* started = std::get_if<StartedEvent>(&event)) {
      id = (chat ? "chatcmpl-" : "cmpl-") + started->job;
      const double queue_ms =
          std::chrono::duration<double, std::milli>(Clock::now() - submitted).count();
      ex.AddHeader("x-medq-job", started->job);
      ex.AddHeader("x-medq-queue-ms", std::to_string(static_cast<int64_t>(queue_ms)));
    } else if (const auto* token = std::get_if<TokenEvent>(&event)) {
      OnToken(ex, *token);
    }
  }

  void OnToken(HttpExchange& ex, const TokenEvent& token) {
    const auto index = static_cast<size_t>(std::max(0, token.index));
    if (index >= choices.size() || (token.text.empty() && token.logprobs.empty())) return;
    ChoiceText& c = choices[index];
    if (stream && !reads_tool_calls) {
      StartStream(ex);
      ex.SendData(DumpJson(
          Chunk(index, {{"content", token.text}}, nullptr, LogprobsJson(c, token.logprobs))));
      return;
    }
    c.text += token.text;
    c.held.insert(c.held.end(), token.logprobs.begin(), token.logprobs.end());
    if (stream && chat) SendSafeContent(ex, index);
  }

  // A tool-reading stream: the text that is content whatever follows.
  void SendSafeContent(HttpExchange& ex, size_t index) {
    ChoiceText& c = choices[index];
    const size_t safe = ToolCallSafePrefix(c.text);
    if (safe <= c.streamed) return;
    StartStream(ex);
    ex.SendData(DumpJson(Chunk(index, {{"content", c.text.substr(c.streamed, safe - c.streamed)}},
                               nullptr, LogprobsJson(c, std::exchange(c.held, {})))));
    c.streamed = safe;
  }

  void StartStream(HttpExchange& ex) const {
    if (ex.streaming()) return;
    ex.StartEventStream();
    if (!chat) return;
    for (size_t i = 0; i < choices.size(); ++i)
      ex.SendData(DumpJson(Chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr)));
  }

  // Choice i's end: from `done`'s choices with "n", else from `done` itself.
  ChoiceEnd EndOf(const GenerateDone& done, size_t i) const {
    ChoiceEnd e;
    const bool several = i < done.choices.size();
    const FinishReason finish = several ? done.choices[i].finish_reason : done.finish_reason;
    // OpenAI has no "cancelled": a stopped answer ends as "stop".
    e.finish = FinishReasonName(finish == FinishReason::kCancelled ? FinishReason::kStop : finish);
    const std::vector<ToolCall>& calls = several ? done.choices[i].tool_calls : done.tool_calls;
    e.calls = calls;
    e.content = calls.empty() ? choices[i].text : several ? done.choices[i].content : done.content;
    return e;
  }

  void OnDone(HttpExchange& ex, const GenerateDone& done) {
    if (!done.model.empty()) model = done.model;
    const int64_t prompt = done.usage.prompt_tokens;
    const int64_t completion = done.usage.completion_tokens;
    const json usage = {{"prompt_tokens", prompt},
                        {"completion_tokens", completion},
                        {"total_tokens", prompt + completion}};
    if (stream) {
      StartStream(ex);
      for (size_t i = 0; i < choices.size(); ++i)
        EndStream(ex, i, EndOf(done, i));
      if (include_usage) {
        json last = Envelope(chat ? "chat.completion.chunk" : "text_completion");
        last["choices"] = json::array();
        last["usage"] = usage;
        ex.SendData(DumpJson(last));
      }
      ex.SendData("[DONE]");
      return ex.EndEventStream();
    }
    json out = Envelope(chat ? "chat.completion" : "text_completion");
    out["choices"] = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
      ChoiceText& c = choices[i];
      const ChoiceEnd e = EndOf(done, i);
      json choice = {{"index", i}};
      if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", c.text}};
        if (!e.calls.empty()) {
          choice["message"]["content"] = e.content.empty() ? json(nullptr) : json(e.content);
          choice["message"]["tool_calls"] = e.calls;
        }
      } else {
        choice["text"] = c.text;
      }
      choice["logprobs"] = LogprobsJson(c, c.held);
      choice["finish_reason"] = e.finish;
      out["choices"].push_back(std::move(choice));
    }
    out["usage"] = usage;
    ex.RespondJson(200, out);
  }

  // A stream's last chunks of choice i: what a tool-reading stream has not
  // sent of its content (the content begins with what it sent, less leading
  // whitespace, which ParseToolCalls trims beside calls), one chunk a call,
  // then the finish_reason.
  void EndStream(HttpExchange& ex, size_t i, const ChoiceEnd& e) {
    ChoiceText& c = choices[i];
    const size_t sent_content =
        e.calls.empty()
            ? c.streamed
            : std::min(e.content.size(),
                       c.streamed - std::min(c.streamed, c.text.find_first_not_of(" \t\r\n")));
    if (reads_tool_calls && (e.content.size() > sent_content || !c.held.empty())) {
      ex.SendData(DumpJson(Chunk(i, {{"content", e.content.substr(sent_content)}}, nullptr,
                                 LogprobsJson(c, c.held))));
    }
    for (size_t k = 0; k < e.calls.size(); ++k) {
      json call = e.calls[k];
      call["index"] = k;
      ex.SendData(DumpJson(Chunk(i, {{"tool_calls", json::array({call})}}, nullptr)));
    }
    ex.SendData(DumpJson(Chunk(i, json::object(), e.finish)));
  }
};

// Every field a route reads (docs/http.md lists them): any other is 400
// naming it, never ignored, so that a client asking for something medq does
// not do (logit_bias, function calls, audio, ...) learns so.
constexpr std::string_view kCommonFields[] = {"model",
                                              "max_tokens",
                                              "max_completion_tokens",
                                              "temperature",
                                              "top_p",
                                              "seed",
                                              "stop",
                                              "n",
                                              "stream",
                                              "stream_options",
                                              "response_format",
                                              "user",
                                              "frequency_penalty",
                                              "presence_penalty",
                                              "logit_bias",
                                              "top_k",
                                              "min_p",
                                              "repeat_penalty",
                                              "priority",
                                              "queue_timeout_s",
                                              "timeout_s",
                                              "adapter",
                                              "logprobs"};
constexpr std::string_view kChatFields[] = {"messages", "tools", "tool_choice",
                                            "parallel_tool_calls", "top_logprobs"};
constexpr std::string_view kCompletionFields[] = {"prompt", "echo", "best_of"};

Status RefuseUnknownFields(const Params& body, std::span<const std::string_view> route_fields) {
  for (const auto& [key, unused] : body.items()) {
    const auto known = [&key](std::span<const std::string_view> names) {
      return std::find(names.begin(), names.end(), key) != names.end();
    };
    if (!known(kCommonFields) && !known(route_fields)) {
      return InvalidField(
          key,
          "'" + Echo(key) + "' is not supported by medq: docs/http.md lists the fields it reads");
    }
  }
  return {};
}

// A field medq accepts only at the value that asks for nothing (a penalty of
// 0, an empty logit_bias): anything else is 400 naming it.
Status OnlyNeutral(const Params& body, std::string_view name, const Params& neutral,
                   std::string_view why) {
  if (!Has(body, name) || body[std::string(name)] == neutral) return {};
  return InvalidField(std::string(name),
                      "'" + std::string(name) + "' is not supported: " + std::string(why));
}

// The fields both routes share, into `generate` params.
Status CommonParams(const Params& body, Params& p, Translation& t) {
  if (Status st = CheckField(body, "user", Kind::kString); !st.ok()) return st;
  if (Status st =
          OnlyNeutral(body, "frequency_penalty", 0,
                      "medq's penalty is repeat_penalty (transformers' repetition_penalty)");
      !st.ok()) {
    return st;
  }
  if (Status st =
          OnlyNeutral(body, "presence_penalty", 0,
                      "medq's penalty is repeat_penalty (transformers' repetition_penalty)");
      !st.ok()) {
    return st;
  }
  if (Status st = OnlyNeutral(body, "logit_bias", Params::object(), "medq does not bias tokens");
      !st.ok()) {
    return st;
  }
  if (Status st = CopyField(body, "response_format", Kind::kObject, p); !st.ok()) return st;
  if (Status st = CopyField(body, "model", Kind::kString, p); !st.ok()) return st;
  if (Has(body, "max_completion_tokens")) {
    if (Status st = CopyField(body, "max_completion_tokens", Kind::kInteger, p, "max_tokens");
        !st.ok()) {
      return st;
    }
  } else if (Status st = CopyField(body, "max_tokens", Kind::kInteger, p); !st.ok()) {
    return st;
  }
  for (const char* name : {"temperature", "top_p", "min_p", "repeat_penalty"}) {
    if (Status st = CopyField(body, name, Kind::kNumber, p); !st.ok()) return st;
  }
  for (const char* name : {"seed", "top_k"}) {
    if (Status st = CopyField(body, name, Kind::kInteger, p); !st.ok()) return st;
  }
  if (Has(body, "stop")) {
    const Params& stop = body["stop"];
    if (stop.is_string()) {
      p["stop"] = Params::array({stop});
    } else if (stop.is_array() && std::all_of(stop.begin(), stop.end(),
                                              [](const Params& s) { return s.is_string(); })) {
      p["stop"] = stop;
    } else {
      return InvalidField("stop", "'stop' must be a string or an array of strings");
    }
  }
  // n answers (1 to 8, checked by generate), decoded side by side.
  if (Status st = CheckField(body, "n", Kind::kInteger); !st.ok()) return st;
  if (Has(body, "n")) {
    p["n"] = body["n"];
    const int64_t n = body["n"].get<int64_t>();
    if (n >= 1 && n <= kMaxChoices) t.choices.resize(static_cast<size_t>(n));
  }
  if (Status st = CheckField(body, "stream", Kind::kBoolean); !st.ok()) return st;
  t.stream = Has(body, "stream") && body["stream"].get<bool>();
  if (Status st = CheckField(body, "stream_options", Kind::kObject); !st.ok()) return st;
  if (Has(body, "stream_options")) {
    if (Status st = CheckField(body["stream_options"], "include_usage", Kind::kBoolean); !st.ok()) {
      return InvalidField("stream_options", "'stream_options.include_usage' must be a boolean");
    }
    t.include_usage = Has(body["stream_options"], "include_usage") &&
                      body["stream_options"]["include_usage"].get<bool>();
  }
  // medq's extensions (docs/http.md).
  if (Status st = CopyField(body, "priority", Kind::kString, p); !st.ok()) return st;
  if (Status st = CopyField(body, "queue_timeout_s", Kind::kNumber, p); !st.ok()) return st;
  if (Status st = CopyField(body, "timeout_s", Kind::kNumber, p); !st.ok()) return st;
  if (Status st = CopyField(body, "adapter", Kind::kString, p); !st.ok()) return st;
  return {};
}

// OpenAI message content may be a list of parts; the text parts are joined.
// A null content (an assistant turn that only calls tools, as every OpenAI
// client sends it) reaches the chat template as "": templates test it with
// `in`, which a null would fail.
Result<Params> ChatMessages(const Params& messages) {
  Params out = Params::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Params& m = messages[i];
    if (!m.is_object())
      return InvalidField("messages", "'messages[" + std::to_string(i) + "]' must be an object");
    Params copy = m;
    if (m.contains("content") && m["content"].is_null()) copy["content"] = "";
    if (m.contains("content") && m["content"].is_array()) {
      std::string text;
      for (const Params& part : m["content"]) {
        if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
            !part["text"].is_string()) {
          return InvalidField("messages",
                              "'messages[" + std::to_string(i) +
                                  "].content' parts must be {\"type\":\"text\",\"text\":...}: medq "
                                  "models take text only");
        }
        text += part["text"].get<std::string>();
      }
      copy["content"] = text;
    }
    out.push_back(std::move(copy));
  }
  return out;
}

// tool_choice goes to generate (which checks it against the tools); a
// request that may call tools streams its answer at the end (below).
// parallel_tool_calls false makes a "required" answer one call.
Status ToolChoice(const Params& body, Params& p, Translation& t) {
  if (Status st = CheckField(body, "parallel_tool_calls", Kind::kBoolean); !st.ok()) return st;
  if (Has(body, "tool_choice")) p["tool_choice"] = body["tool_choice"];
  if (Has(body, "parallel_tool_calls")) p["parallel_tool_calls"] = body["parallel_tool_calls"];
  t.reads_tool_calls = Has(body, "tools") && body["tools"].is_array() && !body["tools"].empty() &&
                       !(Has(body, "tool_choice") && body["tool_choice"] == "none");
  return {};
}

// Starts the generation `params` (the protocol's names, read by the same
// parser as the socket's generate op) with its replies rendered by `t`.
void Run(DaemonState& s, const std::shared_ptr<HttpExchange>& ex, const Params& params,
         std::shared_ptr<Translation> t) {
  auto parsed = ParseGenerateParams(params);
  if (!parsed.ok()) return ex->RespondError(parsed.error());
  if (Status st = RefuseWhileDraining(s); !st.ok()) return ex->RespondError(st.error());
  t->created = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
  t->model = parsed->model.empty() ? s.config.model : parsed->model;
  HttpExchange::Handlers handlers;
  handlers.event = [t](HttpExchange& e, const GenerateEvent& event) { t->OnEvent(e, event); };
  handlers.done = [t](HttpExchange& e, const GenerateDone& done) { t->OnDone(e, done); };
  ex->set_handlers(std::move(handlers));
  StartGenerateJob(s, std::move(*parsed), ReplyTo(s, ex, "generate"), HttpIntake(*ex));
}

}  // namespace

void ChatCompletions(DaemonState& s, const HttpRequest& request, std::shared_ptr<HttpExchange> ex) {
  auto body = ParseBody(request);
  if (!body.ok()) return ex->RespondError(body.error());
  if (Status st = RefuseUnknownFields(*body, kChatFields); !st.ok()) {
    return ex->RespondError(st.error());
  }
  auto t = std::make_shared<Translation>();
  t->chat = true;
  Params p = Params::object();
  if (!Has(*body, "messages"))
    return ex->RespondError(InvalidField("messages", "'messages' is required"));
  if (Status st = CheckField(*body, "messages", Kind::kArray); !st.ok()) {
    return ex->RespondError(st.error());
  }
  auto messages = ChatMessages((*body)["messages"]);
  if (!messages.ok()) return ex->RespondError(messages.error());
  p["messages"] = std::move(*messages);
  // "logprobs": true asks for each token's log-probability, "top_logprobs":
  // N (0 to 20) for the N most likely tokens beside it, only with it.
  if (Status st = CheckField(*body, "logprobs", Kind::kBoolean); !st.ok()) {
    return ex->RespondError(st.error());
  }
  if (Status st = CheckField(*body, "top_logprobs", Kind::kInteger); !st.ok()) {
    return ex->RespondError(st.error());
  }
  t->logprobs = Has(*body, "logprobs") && (*body)["logprobs"].get<bool>();
  if (Has(*body, "top_logprobs") && !t->logprobs) {
    return ex->RespondError(InvalidField("top_logprobs", "'top_logprobs' needs 'logprobs': true"));
  }
  if (t->logprobs) p["logprobs"] = Has(*body, "top_logprobs") ? (*body)["top_logprobs"] : Params(0);
  if (Status st = CommonParams(*body, p, *t); !st.ok()) return ex->RespondError(st.error());
  if (Status st = CopyField(*body, "tools", Kind::kArray, p); !st.ok()) {
    return ex->RespondError(st.error());
  }
  if (Status st = ToolChoice(*body, p, *t); !st.ok()) return ex->RespondError(st.error());
  Run(s, ex, p, std::move(t));
}

void Completions(DaemonState& s, const HttpRequest& request, std::shared_ptr<HttpExchange> ex) {
  auto body = ParseBody(request);
  if (!body.ok()) return ex->RespondError(body.error());
  if (Status st = RefuseUnknownFields(*body, kCompletionFields); !st.ok()) {
    return ex->RespondError(st.error());
  }
  auto t = std::make_shared<Translation>();
  t->chat = false;
  Params p = Params::object();
  const Params prompt = body->value("prompt", Params(nullptr));
  const Params* one = &prompt;
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) one = &prompt[0];
  if (one->is_string()) {
    p["prompt"] = *one;
    p["mode"] = "raw";
  } else if (prompt.is_array() && !prompt.empty() &&
             std::all_of(prompt.begin(), prompt.end(),
                         [](const Params& id) { return id.is_number_integer(); })) {
    p["prompt_ids"] = prompt;
  } else if (prompt.is_array()) {
    return ex->RespondError(InvalidField(
        "prompt",
        "'prompt' must be one string (or token ids): medq answers one prompt per request"));
  } else {
    return ex->RespondError(
        InvalidField("prompt", "'prompt' is required: a string or an array of token ids"));
  }
  // An integer here (each token's log-probability and those of the N most
  // likely tokens, 0 to 20), or null for none.
  if (Status st = CheckField(*body, "logprobs", Kind::kInteger); !st.ok()) {
    return ex->RespondError(st.error());
  }
  t->logprobs = Has(*body, "logprobs");
  if (t->logprobs) p["logprobs"] = (*body)["logprobs"];
  if (Has(*body, "echo") && (*body)["echo"] != false) {
    return ex->RespondError(InvalidField("echo", "'echo' is not supported"));
  }
  if (Has(*body, "best_of") && (*body)["best_of"] != 1) {
    return ex->RespondError(InvalidField("best_of", "'best_of' must be 1"));
  }
  if (Status st = CommonParams(*body, p, *t); !st.ok()) return ex->RespondError(st.error());
  Run(s, ex, p, std::move(t));
}

}  // namespace medq::daemon::http
