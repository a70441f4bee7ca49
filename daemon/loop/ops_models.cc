// Ops that need a loaded model but generate nothing: models, load, unload,
// tokenize, detokenize, apply-template. Each runs as a job on the worker,
// where the models live.
#include <spdlog/spdlog.h>

#include "common/generate_params.h"
#include "common/params.h"
#include "daemon/worker/generate_job.h"
#include "daemon/worker/memory.h"
#include "daemon/worker/model_store.h"
#include "daemon/loop/ops_internal.h"

namespace medq::daemon {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr size_t kMaxTokenizeBytes = size_t{1} << 20;
constexpr size_t kMaxDetokenizeIds = size_t{1} << 18;

using ModelWork = std::function<Result<json>(LoadedModel& model)>;

// Runs `work` on the worker as a job of class `priority`; its result is the
// reply, and the loop's view of the loaded models is refreshed after it.
void SubmitStoreJob(DaemonState& s, const char* op, Priority priority, Responder reply,
                    std::function<Result<json>(ModelStore&)> work) {
  auto shared_reply = std::make_shared<Responder>(std::move(reply));
  auto start = [&s, shared_reply, work = std::move(work)](const std::string& job_id) {
    ModelStore& models = s.models;
    s.worker.Submit(
        [&models, work]() -> Result<json> {
          auto out = work(models);
          if (!out.ok()) return out;
          return json{{"reply", std::move(*out)}, {"loaded", DescribeLoaded(models)}};
        },
        [&s, shared_reply, job_id](Result<json> result) {
          {
            // Scoped: the reply's memory is freed before the trim below.
            Result<json> r = std::move(result);
            if (r.ok()) {
              s.loaded_models = r->at("loaded");
              shared_reply->Result(r->at("reply"));
            } else {
              shared_reply->Fail(r.error());
            }
            s.jobs.Finish(job_id,
                          r.ok() ? JobQueue::Outcome::kCompleted : JobQueue::Outcome::kFailed);
          }
          // Like a generation, a store job gives its memory back under
          // `after-each`. The trim runs on the worker after this completion:
          // inside the work it would come before the reply was freed.
          if (s.config.cleanup == "after-each") {
            s.worker.Submit(
                []() -> Result<json> {
                  ReleaseCachedMemory();
                  return json();
                },
                [](Result<json>) {});
          }
        });
  };
  auto job = s.jobs.Submit(op, priority, start,
                           [shared_reply](const Error& why) { shared_reply->Fail(why); });
  if (!job.ok()) shared_reply->Fail(job.error());
}

// Runs `fn` on the worker with the model the params name (loading it when
// needed), as a normal-priority job; `fn`'s result is the reply.
void SubmitModelJob(DaemonState& s, const char* op, const json& params, Responder reply,
                    ModelWork fn) {
  std::string name = s.config.model;
  std::string adapter_name;
  if (Status st = ReadString(params, "model", name); !st.ok()) return reply.Fail(st.error());
  if (Status st = ReadString(params, "adapter", adapter_name); !st.ok()) {
    return reply.Fail(st.error());
  }
  if (name.empty()) {
    return reply.Fail(Error(ErrorCode::kModelNotFound,
                            "no model named in params.model and no default model configured"));
  }
  auto dir = s.resolver.Resolve(name, "model");
  if (!dir.ok()) return reply.Fail(dir.error());
  fs::path adapter;
  if (!adapter_name.empty()) {
    auto resolved = s.resolver.Resolve(adapter_name, "adapter");
    if (!resolved.ok()) return reply.Fail(resolved.error());
    adapter = *resolved;
  }
  SubmitStoreJob(s, op, Priority::kNormal, std::move(reply),
                 [name, dir = *dir, adapter, fn](ModelStore& models) -> Result<json> {
                   auto model = models.Acquire(name, dir, adapter);
                   if (!model.ok()) return std::move(model).error();
                   return fn(**model);
                 });
}

}  // namespace

json DescribeLoaded(const ModelStore& models) {
  json out = json::array();
  const auto now = std::chrono::steady_clock::now();
  for (const LoadedModel& m : models.loaded()) {
    const engine::ModelInfo& info = engine::Info(*m.model);
    out.push_back(LoadedModelInfo{m.name, info.architecture, info.device, info.dtype,
                                  info.parameter_bytes, m.fell_back_to_cpu, m.tokenizer != nullptr,
                                  m.chat_template.has_value(),
                                  std::chrono::duration<double>(now - m.last_used).count()});
  }
  return out;
}

void ModelsOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  reply.Result({{"models_dir", s.resolver.models_dir().string()},
                {"builtin_models_dir", s.resolver.builtin_dir().string()},
                {"available", s.resolver.Available()},
                {"default", s.config.model},
                {"loaded", s.loaded_models}});
}

void LoadOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {"model", "adapter"}); !st.ok()) {
    return reply.Fail(st.error());
  }
  SubmitModelJob(s, "load", req.params, std::move(reply), [](LoadedModel& m) -> Result<json> {
    const engine::ModelInfo& info = engine::Info(*m.model);
    return json{
        {"model", m.name}, {"device", info.device}, {"dtype", info.dtype}, {"load_ms", m.load_ms}};
  });
}

void UnloadOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {"model"}); !st.ok())
    return reply.Fail(st.error());
  std::string name;
  if (Status st = ReadString(req.params, "model", name); !st.ok()) return reply.Fail(st.error());
  if (name.empty()) {
    return reply.Fail(Error(ErrorCode::kInvalidRequest, "params.model must name a loaded model"));
  }
  SubmitStoreJob(
      s, "unload", Priority::kHigh, std::move(reply), [name](ModelStore& models) -> Result<json> {
        const bool unloaded = models.Unload(name);
        ReleaseCachedMemory();
        if (!unloaded) {
          return Error(ErrorCode::kModelNotFound, "model \"" + name + "\" is not loaded");
        }
        return json{{"model", name}, {"unloaded", true}};
      });
}

void TokenizeOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {"model", "text", "add_special_tokens"});
      !st.ok()) {
    return reply.Fail(st.error());
  }
  auto text = req.params.find("text");
  if (text == req.params.end() || !text->is_string()) {
    return reply.Fail(Error(ErrorCode::kInvalidRequest, "params.text must be a string"));
  }
  // The reply holds every token's id and string: about 40 bytes of JSON and
  // far more in memory per token. The bound keeps one request's work and
  // reply in proportion (a 128k-token context is about 0.5 MiB of text).
  if (const size_t bytes = text->get_ref<const std::string&>().size(); bytes > kMaxTokenizeBytes) {
    return reply.Fail(Error(ErrorCode::kInvalidRequest, "params.text is " + std::to_string(bytes) +
                                                            " bytes; tokenize takes at most " +
                                                            std::to_string(kMaxTokenizeBytes) +
                                                            " bytes"));
  }
  bool special = true;
  if (Status st = ReadBool(req.params, "add_special_tokens", special); !st.ok()) {
    return reply.Fail(st.error());
  }
  SubmitModelJob(s, "tokenize", req.params, std::move(reply),
                 [text = text->get<std::string>(), special](LoadedModel& m) -> Result<json> {
                   if (!m.tokenizer) {
                     return Error(ErrorCode::kInvalidRequest,
                                  "model " + m.name + " has no tokenizer.json");
                   }
                   std::vector<int32_t> ids = m.tokenizer->Encode(text, special);
                   json tokens = json::array();
                   for (int32_t id : ids)
                     tokens.push_back(m.tokenizer->IdToToken(id));
                   return json{{"ids", ids}, {"tokens", tokens}};
                 });
}

void DetokenizeOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {"model", "ids", "skip_special_tokens"});
      !st.ok()) {
    return reply.Fail(st.error());
  }
  auto ids_it = req.params.find("ids");
  std::vector<int32_t> ids;
  if (ids_it == req.params.end() || !ids_it->is_array()) {
    return reply.Fail(Error(ErrorCode::kInvalidRequest, "params.ids must be an array of ids"));
  }
  if (ids_it->size() > kMaxDetokenizeIds) {
    return reply.Fail(Error(ErrorCode::kInvalidRequest, "params.ids holds " +
                                                            std::to_string(ids_it->size()) +
                                                            " ids; detokenize takes at most " +
                                                            std::to_string(kMaxDetokenizeIds)));
  }
  for (const json& id : *ids_it) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return reply.Fail(Error(ErrorCode::kInvalidRequest, "params.ids must hold token ids"));
    }
    ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  bool skip = false;
  if (Status st = ReadBool(req.params, "skip_special_tokens", skip); !st.ok()) {
    return reply.Fail(st.error());
  }
  SubmitModelJob(
      s, "detokenize", req.params, std::move(reply), [ids, skip](LoadedModel& m) -> Result<json> {
        if (!m.tokenizer) {
          return Error(ErrorCode::kInvalidRequest, "model " + m.name + " has no tokenizer.json");
        }
        return json{{"text", m.tokenizer->Decode(ids, skip)}};
      });
}

void ApplyTemplateOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(
          req.params, {"model", "messages", "tools", "template_kwargs", "add_generation_prompt"});
      !st.ok()) {
    return reply.Fail(st.error());
  }
  json gen = {{"messages", req.params.contains("messages") ? req.params["messages"] : json()},
              {"mode", "chat"}};
  for (const char* key : {"tools", "template_kwargs"}) {
    if (req.params.contains(key)) gen[key] = req.params[key];
  }
  auto params = ParseGenerateParams(gen);
  if (!params.ok()) return reply.Fail(params.error());
  bool add_prompt = true;
  if (Status st = ReadBool(req.params, "add_generation_prompt", add_prompt); !st.ok()) {
    return reply.Fail(st.error());
  }
  SubmitModelJob(s, "apply-template", req.params, std::move(reply),
                 [p = std::move(*params), add_prompt](LoadedModel& m) -> Result<json> {
                   auto text = RenderChat(m, p, add_prompt);
                   if (!text.ok()) return std::move(text).error();
                   json out = {{"prompt", *text}};
                   if (m.tokenizer) out["ids"] = m.tokenizer->Encode(*text, false);
                   return out;
                 });
}

}  // namespace medq::daemon
