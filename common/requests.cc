#include "common/requests.h"

#include "common/params.h"

namespace medq {
namespace {

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
  if (r.model.empty()) return InvalidAt("params.model", "must name a loaded model");
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
  if (text == p.end() || !text->is_string()) return InvalidAt("params.text", "must be a string");
  if (const size_t bytes = text->get_ref<const std::string&>().size(); bytes > kMaxTokenizeBytes) {
    return InvalidAt("params.text", "is " + std::to_string(bytes) +
                                        " bytes; tokenize takes at most " +
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
  if (ids == p.end() || !ids->is_array()) return InvalidAt("params.ids", "must be an array of ids");
  if (ids->size() > kMaxDetokenizeIds) {
    return InvalidAt("params.ids", "holds " + std::to_string(ids->size()) +
                                       " ids; detokenize takes at most " +
                                       std::to_string(kMaxDetokenizeIds));
  }
  r.ids.reserve(ids->size());
  for (const Params& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
      return InvalidAt("params.ids", "must hold token ids");
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

namespace {

bool OnlyWhitespace(const std::string& text) {
  return text.find_first_not_of(" \t\n\r\f\v") == std::string::npos;
}

Status ReadEmbedInput(const Params& p, EmbedRequest& r) {
  auto input = p.find("input");
  if (input == p.end() || input->is_null()) {
    return InvalidAt("params.input", "is required: a text or a list of texts");
  }
  if (input->is_string()) {
    r.input.push_back(input->get<std::string>());
  } else if (input->is_array()) {
    r.input_is_list = true;
    if (input->empty())
      return InvalidAt("params.input", "is an empty list; give at least one text");
    r.input.reserve(input->size());
    for (size_t i = 0; i < input->size(); ++i) {
      const auto& text = (*input)[i];
      if (!text.is_string()) {
        return InvalidAt("params.input[" + std::to_string(i) + "]", "must be a string");
      }
      r.input.push_back(text.get<std::string>());
    }
  } else {
    return InvalidAt("params.input", "must be a string or a list of strings");
  }
  for (size_t i = 0; i < r.input.size(); ++i) {
    if (OnlyWhitespace(r.input[i])) {
      const std::string field =
          r.input_is_list ? "params.input[" + std::to_string(i) + "]" : "params.input";
      return InvalidAt(field, "is empty or only whitespace; there is nothing to embed");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<EmbedRequest> ParseEmbedRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"model", "input", "normalize", "truncate", "dimensions",
                                          "priority", "queue_timeout_s", "timeout_s"});
      !st.ok()) {
    return st.error();
  }
  EmbedRequest r;
  if (Status st = ReadString(p, "model", r.model); !st.ok()) return st.error();
  if (Status st = ReadEmbedInput(p, r); !st.ok()) return st.error();
  if (auto it = p.find("normalize"); it != p.end() && !it->is_null()) {
    if (!it->is_boolean()) return InvalidAt("params.normalize", "must be true or false");
    r.normalize = it->get<bool>();
  }
  if (Status st = ReadBool(p, "truncate", r.truncate); !st.ok()) return st.error();
  if (auto it = p.find("dimensions"); it != p.end() && !it->is_null()) {
    // (An unsigned value past int64's range reads back negative: refused too.)
    if (!it->is_number_integer() || it->get<int64_t>() < 1) {
      return InvalidAt("params.dimensions", "must be a positive integer");
    }
    r.dimensions = it->get<int64_t>();
  }
  if (Status st = ReadString(p, "priority", r.priority); !st.ok()) return st.error();
  if (r.priority != "high" && r.priority != "normal" && r.priority != "low") {
    return InvalidAt("params.priority", "must be \"high\", \"normal\" or \"low\"");
  }
  if (auto it = p.find("queue_timeout_s"); it != p.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0)) {
      return InvalidAt("params.queue_timeout_s", "must be a positive number");
    }
    r.queue_timeout_s = it->get<double>();
  }
  if (auto it = p.find("timeout_s"); it != p.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0)) {
      return InvalidAt("params.timeout_s", "must be a positive number");
    }
    r.timeout_s = it->get<double>();
  }
  return r;
}

Params ToParams(const EmbedRequest& r) {
  Params p = Params::object();
  if (!r.model.empty()) p["model"] = r.model;
  if (r.input_is_list || r.input.size() != 1) {
    p["input"] = r.input;
  } else {
    p["input"] = r.input.front();
  }
  if (r.normalize) p["normalize"] = *r.normalize;
  if (!r.truncate) p["truncate"] = false;
  if (r.dimensions) p["dimensions"] = *r.dimensions;
  if (r.priority != "normal") p["priority"] = r.priority;
  if (r.queue_timeout_s) p["queue_timeout_s"] = *r.queue_timeout_s;
  if (r.timeout_s) p["timeout_s"] = *r.timeout_s;
  return p;
}

Result<CancelRequest> ParseCancelRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"job"}); !st.ok()) return st.error();
  CancelRequest r;
  if (Status st = ReadString(p, "job", r.job); !st.ok()) return st.error();
  if (r.job.empty()) return InvalidAt("params.job", "must be a job id string");
  return r;
}

Result<InjectFaultRequest> ParseInjectFaultRequest(const Params& p) {
  if (Status st = RejectUnknownFields(p, {"at"}); !st.ok()) return st.error();
  InjectFaultRequest r;
  if (Status st = ReadString(p, "at", r.at); !st.ok()) return st.error();
  if (r.at != "load" && r.at != "merge" && r.at != "decode" && r.at != "decode-error" &&
      r.at != "completion" && r.at != "store-write") {
    return InvalidAt("params.at",
                     "must be \"load\", \"merge\", \"decode\", \"decode-error\", \"completion\" "
                     "or \"store-write\"");
  }
  return r;
}

}  // namespace medq
