#include "daemon/engine/lora.h"

#include <c10/core/InferenceMode.h>

#include <cmath>
#include <map>
#include <regex>

#include <nlohmann/json.hpp>

#include "daemon/engine/adapter_config.h"
#include "daemon/engine/packed_weights.h"
#include "daemon/engine/safetensors.h"
#include "daemon/engine/status_macros.h"
#include "daemon/engine/tensor_view.h"
#include "daemon/engine/weights.h"

namespace medq::engine {
namespace {

struct LoraPair {
  at::Tensor a, b;  // [r, in], [out, r]
};

// "base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight" ->
// layer 3, module "q_proj", matrix "A" (an adapter name before ".weight" is allowed).
bool ParseName(const std::string& name, int64_t* layer, std::string* module, char* which) {
  static const std::regex re(
      R"(^base_model\.model\.model\.layers\.(\d{1,6})\.(self_attn|mlp)\.([a-z_]+)\.lora_([AB])(\.[A-Za-z0-9_]+)?\.weight$)");
  std::smatch m;
  if (!std::regex_match(name, m, re)) return false;
  *layer = std::stoll(m[1].str());
  *module = m[3].str();
  *which = m[4].str()[0];
  return true;
}

}  // namespace

Result<std::shared_ptr<const Model>> MergeAdapter(const std::shared_ptr<const Model>& base,
                                                  const std::filesystem::path& dir) {
  c10::InferenceMode inference_mode;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    return Error(ErrorCode::kModelNotFound,
                 "adapter directory " + dir.string() + " does not exist");
  }
  AdapterConfig config;
  MEDQ_ASSIGN_OR_RETURN(config, ParseAdapterConfig(dir / "adapter_config.json"));
  const auto weights_path = dir / "adapter_model.safetensors";
  auto opened = SafetensorsFile::Open(weights_path);
  if (!opened.ok()) {
    Error e = opened.error();
    e.code = ErrorCode::kInvalidRequest;
    return e;
  }
  const auto& file = *opened;

  std::map<std::pair<int64_t, std::string>, LoraPair> pairs;
  for (const auto& info : file->tensors()) {
    int64_t layer = 0;
    std::string module;
    char which = 'A';
    if (!ParseName(info.name, &layer, &module, &which)) {
      return AdapterError(weights_path,
                          "tensor '" + info.name + "' is not a LoRA A/B weight of a decoder layer");
    }
    if (config.targets.count(module) == 0) {
      return AdapterError(weights_path,
                          "tensor '" + info.name + "' targets '" + module +
                              "', which adapter_config.json's target_modules does not list");
    }
    if (layer >= base->config.num_layers) {
      return AdapterError(weights_path, "tensor '" + info.name + "' is for layer " +
                                            std::to_string(layer) + " but the base model has " +
                                            std::to_string(base->config.num_layers) + " layers");
    }
    if (info.shape.size() != 2 || !at::isFloatingType(ToScalarType(info.dtype))) {
      return AdapterError(weights_path,
                          "tensor '" + info.name + "' is not a 2-D floating-point matrix");
    }
    LoraPair& p = pairs[{layer, module}];
    (which == 'A' ? p.a : p.b) = TensorView(file, info).to(at::kFloat);
  }
  if (pairs.empty()) return AdapterError(weights_path, "holds no LoRA weights");

  auto model = std::make_shared<Model>(*base);  // shares every tensor with base
  const double scale = config.rslora ? config.alpha / std::sqrt(static_cast<double>(config.r))
                                     : config.alpha / static_cast<double>(config.r);
  for (auto& [key, p] : pairs) {
    const std::string where = "layer " + std::to_string(key.first) + " " + key.second;
    if (!p.a.defined() || !p.b.defined()) {
      return AdapterError(weights_path, where + " has only one of lora_A / lora_B");
    }
    at::Tensor* w =
        ProjectionWeight(model->weights.layers[static_cast<size_t>(key.first)], key.second);
    if (w == nullptr) return AdapterError(weights_path, where + " is not a projection");
    const int64_t out = w->size(0), in = w->size(1);
    if (p.a.size(1) != in || p.b.size(0) != out || p.a.size(0) != p.b.size(1) ||
        p.a.size(0) != config.r) {
      return AdapterError(weights_path,
                          where + ": lora_A [" + std::to_string(p.a.size(0)) + ", " +
                              std::to_string(p.a.size(1)) + "] and lora_B [" +
                              std::to_string(p.b.size(0)) + ", " + std::to_string(p.b.size(1)) +
                              "] do not fit the base weight [" + std::to_string(out) + ", " +
                              std::to_string(in) + "] (r = " + std::to_string(config.r) +
                              "); the adapter was trained for another model");
    }
    // Merge in float32 on the weight's device, then store in the weight dtype:
    // a new tensor, so the base model's weight stays as it was.
    const at::Tensor delta = at::matmul(p.b.to(w->device()), p.a.to(w->device())) * scale;
    *w = (w->to(at::kFloat) + delta).to(w->scalar_type()).contiguous();
  }
  for (auto& [key, p] : pairs)
    FuseProjections(model->weights.layers[static_cast<size_t>(key.first)]);
  // A packed base is packed again where the merge replaced a matrix.
  if (base->weights.lm_head_packed.defined()) PackProjections(model->weights, &base->weights);
  model->info.parameter_bytes = ParameterBytes(model->weights);
  return std::shared_ptr<const Model>(std::move(model));
}

}  // namespace medq::engine
