// Ops that need a loaded model but generate nothing: models, load, unload,
// tokenize, detokenize, apply-template. Each is a task of the scheduler's
// model class: its body (worker/tasks.h) runs on the worker, where the
// models live, between two steps of the running generations.
#include <spdlog/spdlog.h>

#include "common/requests.h"
#include "daemon/loop/fs_work.h"
#include "daemon/loop/ops_internal.h"
#include "daemon/worker/model_store.h"
#include "daemon/worker/tasks.h"

namespace medq::daemon {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// Runs `work` on the worker as a model-class job; its typed result is the
// reply.
template <typename R>
void SubmitModelTask(DaemonState& s, const char* op, Priority priority, Responder reply,
                     Scheduler::Work<R> work) {
  auto shared_reply = std::make_shared<Responder>(std::move(reply));
  JobSpec spec;
  spec.cls = JobClass::kModel;
  spec.op = op;
  spec.priority = priority;
  spec.owner = shared_reply->owner();
  auto job =
      s.scheduler.Submit<R>(std::move(spec), std::move(work), [&s, op, shared_reply](Result<R> r) {
        s.faults.ThrowIfCompletionArmed(op);
        if (r.ok()) {
          shared_reply->Result(json(*r));
        } else {
          shared_reply->Fail(r.error());
        }
      });
  if (!job.ok()) shared_reply->Fail(job.error());
}

// Runs `fn` (worker/tasks.h) on the worker with the model `ref` names
// (loading it when needed), as a normal-priority model job; `fn`'s result is
// the reply.
template <typename R>
void SubmitWithModel(DaemonState& s, const char* op, const ModelRef& ref, Responder reply,
                     std::function<Result<R>(LoadedModel& model)> fn) {
  auto shared_reply = std::make_shared<Responder>(std::move(reply));
  ResolveModel(s, ref.model, ref.adapter,
               [&s, op, shared_reply, fn = std::move(fn)](Result<ResolvedModel> found) {
                 if (!found.ok()) return shared_reply->Fail(found.error());
                 ModelLocation where{found->name, found->dir, found->adapter_dir};
                 SubmitModelTask<R>(s, op, Priority::kNormal, std::move(*shared_reply),
                                    [where, fn](Worker& worker) -> Result<R> {
                                      auto model = AcquireModel(worker, where);
                                      if (!model.ok()) return std::move(model).error();
                                      return fn(**model);
                                    });
               });
}

}  // namespace

void ResolveModel(DaemonState& s, const std::string& model, const std::string& adapter,
                  std::function<void(Result<ResolvedModel>)> next) {
  const std::string name = model.empty() ? s.config.model : model;
  if (name.empty()) {
    return next(Error(ErrorCode::kModelNotFound,
                      "no model named in params.model and no default model configured "
                      "(medqd --model NAME)"));
  }
  const ModelResolver& resolver = s.resolver;
  RunFsWork<Result<ResolvedModel>>(
      s.loop,
      [&resolver, name, adapter]() -> Result<ResolvedModel> {
        ResolvedModel found{name, {}, {}};
        // "NAME:int4": NAME's folder, loaded with that quantization
        // (ModelStore reads the suffix from the name it is given).
        auto split = SplitModelName(name);
        if (!split.ok()) return split.error();
        auto dir = resolver.Resolve(split->folder, "model");
        if (!dir.ok()) return dir.error();
        found.dir = *dir;
        found.kind =
            engine::IsEmbeddingModelDir(found.dir) ? ModelKind::kEmbedding : ModelKind::kGeneration;
        if (found.kind == ModelKind::kEmbedding && !split->quantize.empty()) {
          return InvalidField("model",
                              "params.model: \"" + Echo(name) +
                                  "\" is an embedding model, which is not quantized; name it "
                                  "without "
                                  "the ':" +
                                  split->quantize + "' suffix");
        }
        if (!adapter.empty()) {
          auto adapter_dir = resolver.Resolve(adapter, "adapter");
          if (!adapter_dir.ok()) return adapter_dir.error();
          found.adapter_dir = *adapter_dir;
        }
        return found;
      },
      [&s, next = std::move(next)](Result<ResolvedModel> found) {
        if (s.draining) {
          return next(Error(ErrorCode::kNotReady, "medqd is shutting down; retry once it is back"));
        }
        next(std::move(found));
      });
}

void ListAvailableModels(DaemonState& s,
                         std::function<void(Result<std::vector<std::string>>)> done) {
  const ModelResolver& resolver = s.resolver;
  RunFsWork<Result<std::vector<std::string>>>(
      s.loop, [&resolver]() -> Result<std::vector<std::string>> { return resolver.Available(); },
      std::move(done));
}

void ModelsOp(DaemonState& s, const Request& req, Responder reply) {
  if (Status st = RejectUnknownFields(req.params, {}); !st.ok()) return reply.Fail(st.error());
  auto shared_reply = std::make_shared<Responder>(std::move(reply));
  ListAvailableModels(s, [&s, shared_reply](Result<std::vector<std::string>> available) {
    if (!available.ok()) return shared_reply->Fail(available.error());
    shared_reply->Result({{"models_dir", s.resolver.models_dir().string()},
                          {"builtin_models_dir", s.resolver.builtin_dir().string()},
                          {"available", std::move(*available)},
                          {"default", s.config.model},
                          {"loaded", s.scheduler.view().loaded}});
  });
}

void LoadOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseLoadRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  SubmitWithModel<LoadResult>(s, "load", request->ref, std::move(reply), &DescribeLoad);
}

void UnloadOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseUnloadRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  SubmitModelTask<UnloadResult>(
      s, "unload", Priority::kHigh, std::move(reply),
      [name = request->model](Worker& worker) { return UnloadModel(worker, name); });
}

void TokenizeOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseTokenizeRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  SubmitWithModel<TokenizeResult>(
      s, "tokenize", request->ref, std::move(reply),
      [text = std::move(request->text), special = request->add_special_tokens](LoadedModel& m) {
        return TokenizeText(m, text, special);
      });
}

void DetokenizeOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseDetokenizeRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  SubmitWithModel<DetokenizeResult>(
      s, "detokenize", request->ref, std::move(reply),
      [ids = std::move(request->ids), skip = request->skip_special_tokens](LoadedModel& m) {
        return DetokenizeIds(m, ids, skip);
      });
}

void ApplyTemplateOp(DaemonState& s, const Request& req, Responder reply) {
  auto request = ParseApplyTemplateRequest(req.params);
  if (!request.ok()) return reply.Fail(request.error());
  SubmitWithModel<ApplyTemplateResult>(
      s, "apply-template", request->ref, std::move(reply),
      [conversation = std::move(request->conversation),
       add_prompt = request->add_generation_prompt](LoadedModel& m) {
        return ApplyTemplate(m, conversation, add_prompt);
      });
}

}  // namespace medq::daemon
