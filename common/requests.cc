#include "common/requests.h"

#include "common/params.h"

namespace medq {
namespace {

Error Invalid(const std::string& what) {
  return Error(ErrorCode::kInvalidRequest, what);
}

Status ReadRef(const Params& p, ModelRef& ref) {
  if (Status st = ReadString(p, "model", ref.model); !st.ok()) return st;
  return ReadString(p, "adapter", ref.adapter);
}

void WriteRef(const ModelRef& ref, Params& p) {
  if (!ref.model.empty()) p["model"] = ref.model;
  if (!ref.adapter.empty()) p["adapter"] = ref.adapter;
}

}  // namespace

Result<LoadRequest> ParseLoadRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"model", "adapter"}); !st.ok()) return st.error();
  LoadRequest r;
  if (Status st = ReadRef(p, r.ref); !st.ok()) return st.error();
  return r;
}

Params ToParams(const LoadRequest& r) {
  Params p = Params::object();
  WriteRef(r.ref, p);
  return p;
}

Result<UnloadRequest> ParseUnloadRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"model"}); !st.ok()) return st.error();
  UnloadRequest r;
  if (Status st = ReadString(p, "model", r.model); !st.ok()) return st.error();
  if (r.model.empty()) return Invalid("params.model must name a loaded model");
  return r;
}

Result<TokenizeRequest> ParseTokenizeRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"model", "adapter", "text", "add_special_tokens"});
      !st.ok()) {
    return st.error();
  }
  TokenizeRequest r;
  if (Status st = ReadRef(p, r.ref); !st.ok()) return st.error();
  auto text = p.find("text");
  if (text == p.end() || !text->is_string()) return Invalid("params.text must be a string");
  if (const size_t bytes = text->get_ref<const std::string&>().size(); bytes > kMaxTokenizeBytes) {
    return Invalid("params.text is " + std::to_string(bytes) + " bytes; tokenize takes at most " +
                   std::to_string(kMaxTokenizeBytes) + " bytes");
  }
  r.text = text->get<std::string>();
  if (Status st = ReadBool(p, "add_special_tokens", r.add_special_tokens); !st.ok()) {
    return st.error();
  }
  return r;
}

Params ToParams(const TokenizeRequest& r) {
  Params p = Params::object();
  WriteRef(r.ref, p);
  p["text"] = r.text;
  p["add_special_tokens"] = r.add_special_tokens;
  return p;
}

Result<DetokenizeRequest> ParseDetokenizeRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"model", "adapter", "ids", "skip_special_tokens"});
      !st.ok()) {
    return st.error();
  }
  DetokenizeRequest r;
  if (Status st = ReadRef(p, r.ref); !st.ok()) return st.error();
  auto ids = p.find("ids");
  if (ids == p.end() || !ids->is_array()) return Invalid("params.ids must be an array of ids");
  if (ids->size() > kMaxDetokenizeIds) {
    return Invalid("params.ids holds " + std::to_string(ids->size()) +
                   " ids; detokenize takes at most " + std::to_string(kMaxDetokenizeIds));
  }
  r.ids.reserve(ids->size());
  for (const Params& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return Invalid("params.ids must hold token ids");
    }
    r.ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
  }
  if (Status st = ReadBool(p, "skip_special_tokens", r.skip_special_tokens); !st.ok()) {
    return st.error();
  }
  return r;
}

Result<ApplyTemplateRequest> ParseApplyTemplateRequest(const Params& p) {
  if (Status st = RejectUnknownFields(
          p, {"model", "adapter", "messages", "tools", "template_kwargs", "add_generation_prompt"});
      !st.ok()) {
    return st.error();
  }
  ApplyTemplateRequest r;
  if (Status st = ReadRef(p, r.ref); !st.ok()) return st.error();
  // The conversation is read by generate's parser, so that both ops take the
  // same shapes and give the same errors.
  Params conversation = {{"messages", p.contains("messages") ? p["messages"] : Params()},
                         {"mode", "chat"}};
  for (const char* key : {"tools", "template_kwargs"}) {
    if (p.contains(key)) conversation[key] = p[key];
  }
  auto parsed = ParseGenerateParams(conversation);
  if (!parsed.ok()) return parsed.error();
  r.conversation = std::move(*parsed);
  if (Status st = ReadBool(p, "add_generation_prompt", r.add_generation_prompt); !st.ok()) {
    return st.error();
  }
  return r;
}

Result<CancelRequest> ParseCancelRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"job"}); !st.ok()) return st.error();
  CancelRequest r;
  if (Status st = ReadString(p, "job", r.job); !st.ok()) return st.error();
  if (r.job.empty()) return Invalid("params.job must be a job id string");
  return r;
}

Result<InjectFaultRequest> ParseInjectFaultRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"at"}); !st.ok()) return st.error();
  InjectFaultRequest r;
  if (Status st = ReadString(p, "at", r.at); !st.ok()) return st.error();
  if (r.at != "load" && r.at != "merge" && r.at != "decode") {
    return Invalid("params.at must be \"load\", \"merge\" or \"decode\"");
  }
  return r;
}

}  // namespace medq
