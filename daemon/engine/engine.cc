// The public facade: option parsing, loading order, and the one place where
// exceptions become medq::Error values.
#include "daemon/engine/engine.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <torch/cuda.h>

#include <algorithm>

#include "daemon/engine/attention.h"
#include "daemon/engine/checkpoint.h"
#include "daemon/engine/device_memory.h"
#include "daemon/engine/device_name.h"
#include "daemon/engine/device_quantized.h"
#include "daemon/engine/fault_injection.h"
#include "daemon/engine/generate.h"
#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/lora.h"
#include "daemon/engine/model.h"
#include "daemon/engine/packed_weights.h"
#include "daemon/engine/quantize.h"
#include "daemon/engine/quantized_embeddings.h"
#include "daemon/engine/rope.h"
#include "daemon/engine/status_macros.h"
#include "daemon/engine/torch_errors.h"
#include "daemon/engine/torch_version.h"
#include "daemon/engine/weights.h"

namespace medq::engine {
namespace {

at::ScalarType CheckpointDtype(const ModelConfig& c,
                               const std::map<std::string, CheckpointTensor>& tensors) {
  if (c.torch_dtype == "bfloat16") return at::kBFloat16;
  if (c.torch_dtype == "float16") return at::kHalf;
  if (c.torch_dtype == "float32") return at::kFloat;
  const auto it = tensors.find("model.embed_tokens.weight");
  if (it != tensors.end() && at::isFloatingType(it->second.tensor.scalar_type())) {
    return it->second.tensor.scalar_type();
  }
  return at::kFloat;
}

Result<WeightPlacement> Place(const LoadOptions& o, at::Device device, at::ScalarType checkpoint) {
  WeightPlacement p;
  p.device = device;
  const bool cpu = device.is_cpu();
  if (o.dtype == "auto") {
    // The checkpoint's dtype, except fp16 on the CPU (no fp16 kernels there):
    // a bf16 checkpoint keeps bf16 weights, which the CPU kernels widen to
    // float32 as they read them, so nothing is lost and half the bytes move.
    p.weight_dtype = cpu && checkpoint != at::kBFloat16 ? at::kFloat : checkpoint;
  } else if (o.dtype == "fp32") {
    p.weight_dtype = at::kFloat;
  } else if (o.dtype == "bf16") {
    p.weight_dtype = at::kBFloat16;
  } else if (o.dtype == "fp16") {
    if (cpu) {
      return Error(ErrorCode::kInvalidRequest,
                   "dtype fp16 is not supported on cpu; use fp32 or bf16 there");
    }
    p.weight_dtype = at::kHalf;
  } else {
    return Error(ErrorCode::kInvalidRequest,
                 "dtype '" + o.dtype + "' is not one of auto, bf16, fp16, fp32");
  }
  // On CPU, activations are float32 whatever the weights' dtype.
  p.compute_dtype = cpu ? at::kFloat : p.weight_dtype;
  return p;
}

// Quantizes `model`'s projections as `q` says (int4 in groups of `group`),
// and its embeddings and lm_head with `embeddings`, and records it in the
// model and its info (parameter bytes included). INVALID_REQUEST naming the
// model, and `model` untouched, where int4's groups do not fit its matrices
// (the projections' input widths include the hidden size, the vocabulary
// matrices' width).
Status ApplyQuantization(Model& model, Quantization q, int64_t group, bool embeddings) {
  if (q == Quantization::kInt4) {
    MEDQ_RETURN_IF_ERROR(CheckInt4Groups(model.weights, group, model.dir.filename().string()));
  }
  if (q != Quantization::kNone) {
    ModelWeights w = model.weights;  // replaced whole or not at all
    QuantizeProjections(w, q, group);
    if (embeddings) QuantizeEmbeddings(w, q, group);
    model.weights = std::move(w);
  }
  model.quantization = q;
  model.info.quantization = QuantizationName(q);
  model.info.quantized_embeddings = q != Quantization::kNone && embeddings;
  model.info.parameter_bytes = ParameterBytes(model.weights);
  return Status::Ok();
}

// Where `model` runs and in which dtypes, in the model and in its info.
void SetPlacement(Model& model, at::Device device, const WeightPlacement& p) {
  model.device = device;
  model.cuda_presence = device.is_cuda() ? CudaPresence() : nullptr;
  model.weight_dtype = p.weight_dtype;
  model.compute_dtype = p.compute_dtype;
  model.info.device = DeviceName(device);
  model.info.dtype = DtypeName(p.weight_dtype);
  model.info.compute_element_bytes = static_cast<int64_t>(c10::elementSize(p.compute_dtype));
}

// Moves `model`, quantized in host memory, to `device` in the form its
// kernels read there (device_quantized.h), and counts its bytes again.
void PlaceQuantized(Model& model, at::Device device) {
  MoveQuantizedWeights(model.weights, model.quantization, device, model.weight_dtype,
                       model.compute_dtype);
  model.device_quantized_form = model.quantization == Quantization::kInt4;
  model.info.parameter_bytes = ParameterBytes(model.weights);
}

Result<std::shared_ptr<const Model>> LoadDecoder(const std::filesystem::path& dir,
                                                 const LoadOptions& o) {
  c10::InferenceMode inference_mode;
  auto model = std::make_shared<Model>();
  model->dir = dir;
  MEDQ_ASSIGN_OR_RETURN(model->config, LoadModelConfig(dir));
  at::Device device = at::kCPU;
  MEDQ_ASSIGN_OR_RETURN(device, ParseDevice(o.device));
  Quantization quantization = Quantization::kNone;
  MEDQ_ASSIGN_OR_RETURN(quantization, ParseQuantization(o.quantize));
  const PrequantizedConfig& prequantized = model->config.prequantized;
  if (prequantized.format != PrequantizedFormat::kNone) {
    // The checkpoint's own int4 wins over every quantize setting: int8 or
    // none would only re-round or widen the same 4-bit weights.
    quantization = Quantization::kInt4;
  }
  std::map<std::string, CheckpointTensor> tensors;
  MEDQ_ASSIGN_OR_RETURN(tensors, ReadCheckpoint(dir));
  WeightPlacement placement;
  const at::ScalarType checkpoint_dtype = CheckpointDtype(model->config, tensors);
  MEDQ_ASSIGN_OR_RETURN(placement, Place(o, device, checkpoint_dtype));
  // Quantized for a GPU (or in a GPU's form on the CPU, for CI): built and
  // quantized in host memory, then moved (device_quantized.h).
  const bool moved_after = HoldsDeviceForm(quantization, device);
  if (moved_after) placement.device = at::kCPU;
  if (prequantized.format != PrequantizedFormat::kNone && o.dtype == "auto" && device.is_cpu() &&
      checkpoint_dtype == at::kHalf) {
    // A 4-bit checkpoint is there to be small: its full-precision matrices
    // (embeddings, lm_head, norms; fp16, which the CPU has no kernels for)
    // are held as bf16, which the kernels widen as they read, not as float32
    // (for a 7B model 0.5 GB instead of 1 GB). dtype = fp32 asks for float32.
    placement.weight_dtype = at::kBFloat16;
  }
  placement.prequantized = prequantized;
  MEDQ_ASSIGN_OR_RETURN(model->weights, BuildWeights(model->config, std::move(tensors), placement));
  if (moved_after) {
    MEDQ_RETURN_IF_ERROR(CheckDeviceQuantization(model->weights, quantization, device,
                                                 o.quantize_embeddings, dir.filename().string()));
  }
  SetPlacement(*model, device, placement);
  model->inv_freq = RopeInvFreq(model->config);
  if (quantization == Quantization::kNone && o.pack_for_batches &&
      PackableProjections(model->weights)) {
    PackProjections(model->weights, nullptr);
  }

  ModelInfo& info = model->info;
  info.architecture = model->config.architecture;
  info.vocab_size = model->config.vocab_size;
  info.max_context = model->config.max_position_embeddings;
  info.parameter_bytes = ParameterBytes(model->weights);
  info.eos_ids = model->config.eos_ids;
  info.bos_id = model->config.bos_id;
  info.num_layers = model->config.num_layers;
  info.num_heads = model->config.num_heads;
  info.num_kv_heads = model->config.num_kv_heads;
  info.head_dim = model->config.head_dim;
  info.hidden_size = model->config.hidden_size;
  info.intermediate_size = model->config.intermediate_size;
  info.fused_causal_attention = FusedCausalAttention();
  info.attention_query_block = AttentionQueryBlock();
  if (prequantized.format != PrequantizedFormat::kNone) {
    // Its projections are int4 already (BuildWeights, in host memory; a
    // GPU's model is moved below). Its embeddings and lm_head become int4 as
    // any int4 model's do.
    if (o.quantize_embeddings) {
      if (!IsInt4Group(o.quantize_group) || model->config.hidden_size % o.quantize_group != 0) {
        return Error(ErrorCode::kInvalidRequest,
                     "model " + dir.filename().string() + ": quantize_embeddings needs int4 " +
                         "groups of 32, 64 or 128 weights that divide the hidden size " +
                         std::to_string(model->config.hidden_size) + ", and quantize_group is " +
                         std::to_string(o.quantize_group));
      }
      QuantizeEmbeddings(model->weights, Quantization::kInt4, o.quantize_group);
      info.quantized_embeddings = true;
    }
    model->quantization = Quantization::kInt4;
    info.quantization = QuantizationName(Quantization::kInt4);
    info.parameter_bytes = ParameterBytes(model->weights);
  } else {
    MEDQ_RETURN_IF_ERROR(
        ApplyQuantization(*model, quantization, o.quantize_group, o.quantize_embeddings));
  }
  if (moved_after) PlaceQuantized(*model, device);
  if (device.is_cuda()) {
    WarmUp(*model);
    EmptyDeviceCaches();
  }
  return std::shared_ptr<const Model>(std::move(model));
}

// LibTorch's OpenMP pool at least at the kernels' width for the bulk copies
// of a load or a LoRA merge (dtype conversion, q/k/v stacking, B·A), which
// nothing else runs beside; back to what it was after (one thread after
// InitWorkerThread).
class WideTorchThreads {
 public:
  WideTorchThreads() : previous_(at::get_num_threads()) {
    at::set_num_threads(std::max(previous_, kernels::KernelThreads()));
  }
  ~WideTorchThreads() { at::set_num_threads(previous_); }
  WideTorchThreads(const WideTorchThreads&) = delete;
  WideTorchThreads& operator=(const WideTorchThreads&) = delete;

 private:
  const int previous_;
};

}  // namespace

std::string DtypeName(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16:
      return "bf16";
    case at::kHalf:
      return "fp16";
    default:
      return "fp32";
  }
}

std::string DeviceName(at::Device device) {
  return device.is_cpu() ? "cpu" : "cuda:" + std::to_string(device.index());
}

Result<at::Device> ParseDevice(const std::string& text) {
  if (text == "cpu") return at::Device(at::kCPU);
  int64_t index = 0;
  if (text == "cuda") {
    index = 0;
  } else if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 8 &&
             text.find_first_not_of("0123456789", 5) == std::string::npos) {
    index = std::stoll(text.substr(5));
  } else {
    return Error(ErrorCode::kInvalidRequest,
                 "device '" + text + "' is not one of cpu, cuda, cuda:N");
  }
  if (!torch::cuda::is_available()) {
    return Error(ErrorCode::kNotReady,
                 "device '" + text + "' requested but this build or machine has no CUDA device");
  }
  if (index >= static_cast<int64_t>(torch::cuda::device_count())) {
    return Error(ErrorCode::kInvalidRequest, "device '" + text + "' does not exist: " +
                                                 std::to_string(torch::cuda::device_count()) +
                                                 " CUDA device(s) visible");
  }
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

Result<std::shared_ptr<const Model>> LoadModel(const std::filesystem::path& dir,
                                               const LoadOptions& options) {
  WideTorchThreads wide;
  try {
    FailIfArmed(Fault::kLoadOom);
    return LoadDecoder(dir, options);
  } catch (...) {
    return ErrorFromCurrentException("loading model " + dir.string());
  }
}

Result<std::shared_ptr<const Model>> ApplyAdapter(std::shared_ptr<const Model> base,
                                                  const std::filesystem::path& adapter_dir,
                                                  const std::string& quantize,
                                                  int64_t quantize_group, bool quantize_embeddings,
                                                  const std::string& device,
                                                  const std::string& dtype) {
  if (base == nullptr) return Error(ErrorCode::kInternal, "ApplyAdapter: no base model");
  Quantization quantization = Quantization::kNone;
  MEDQ_ASSIGN_OR_RETURN(quantization, ParseQuantization(quantize));
  at::Device target = base->device;
  if (!device.empty()) MEDQ_ASSIGN_OR_RETURN(target, ParseDevice(device));
  if (target != base->device &&
      (quantization == Quantization::kNone || !base->device.is_cpu() || !target.is_cuda())) {
    return Error(ErrorCode::kInvalidRequest,
                 "an adapted model moves only from the CPU to a GPU, and only quantized: "
                 "load the base on the device the adapted model runs on, or quantize it");
  }
  if (base->config.prequantized.format != PrequantizedFormat::kNone) {
    return Error(ErrorCode::kInvalidRequest,
                 "model " + base->dir.filename().string() + " is a pre-quantized " +
                     PrequantizedName(base->config.prequantized.format) +
                     " checkpoint: an adapter merges into full-precision weights, which it "
                     "does not have; merge the adapter into the model's full-precision release "
                     "and load that (with quantize = int4 for 4 bits)");
  }
  if (base->quantization != Quantization::kNone) {
    return Error(ErrorCode::kInvalidRequest,
                 "model " + base->dir.filename().string() + " is quantized (" +
                     QuantizationName(base->quantization) +
                     "): an adapter merges into full-precision weights; load the base with "
                     "quantize = none and quantize the adapted model");
  }
  WideTorchThreads wide;
  try {
    FailIfArmed(Fault::kMergeOom);
    auto merged = MergeAdapter(base, adapter_dir);
    if (!merged.ok() || quantization == Quantization::kNone) return merged;
    auto model = std::make_shared<Model>(**merged);
    c10::InferenceMode inference_mode;
    // Quantized in host memory (QuantizeProjections' contract), then placed
    // in the GPU's form (device_quantized.h): merged on the GPU and brought
    // back, or merged on the CPU (a base the GPU could not hold in full
    // precision) and taken there for the first time.
    const bool form = HoldsDeviceForm(quantization, target);
    if (form) {
      MEDQ_RETURN_IF_ERROR(CheckDeviceQuantization(model->weights, quantization, target,
                                                   quantize_embeddings,
                                                   model->dir.filename().string()));
    }
    if (model->device.is_cuda()) {
      MoveQuantizedWeights(model->weights, Quantization::kNone, at::kCPU, model->weight_dtype,
                           model->compute_dtype);
    }
    MEDQ_RETURN_IF_ERROR(
        ApplyQuantization(*model, quantization, quantize_group, quantize_embeddings));
    if (target != model->device) {
      // From the CPU's float32 (a merge's) to the dtypes a load on `target`
      // gives this checkpoint.
      WeightPlacement placement;
      MEDQ_ASSIGN_OR_RETURN(
          placement, Place(LoadOptions{device, dtype}, target, CheckpointDtype(model->config, {})));
      SetPlacement(*model, target, placement);
    }
    if (form) PlaceQuantized(*model, target);
    if (target.is_cuda()) {
      WarmUp(*model);
      EmptyDeviceCaches();
    }
    return std::shared_ptr<const Model>(std::move(model));
  } catch (...) {
    return ErrorFromCurrentException("applying adapter " + adapter_dir.string() + " to model " +
                                     base->dir.string());
  }
}

const ModelInfo& Info(const Model& model) {
  return model.info;
}

Result<GenerateResult> Generate(const Model& model, const GenerateRequest& request,
                                const std::function<bool(int32_t)>& on_token) {
  try {
    return RunGeneration(model, request, on_token);
  } catch (...) {
    return ErrorFromCurrentException("generating with model " + model.dir.string());
  }
}

void InitWorkerThread(int num_threads) {
  // The engine's own CPU kernels (Linear(), and with it every decode step)
  // split their work over num_threads (0: every core) with their own pool.
  // LibTorch's OpenMP pool gets one thread: its workers spin for a while after
  // each region, and on a 2-core machine that starved the kernels' helper and
  // BLAS's threads (decode ~20% slower, prefill up to 2x). GEMM keeps every
  // core through BLAS's own threads.
  kernels::SetKernelThreads(num_threads);
  at::set_num_threads(1);
  // fp32 on a GPU means fp32: TF32 matmuls would move logits by ~1e-2.
  at::globalContext().setAllowTF32CuBLAS(false);
  at::globalContext().setAllowTF32CuDNN(false);
#if MEDQ_TORCH_AT_LEAST(2, 5)
  // Attention never goes to cuDNN's backend. A decode step's keys grow by one
  // every step, and with cuDNN's backend enabled each key length not seen
  // before cost 36 to 38 ms a call (flash attention: 0.05 ms), on an H200
  // with LibTorch 2.11 (bench/engine/sdpa_backends.py): bf16 SmolLM-135M
  // decoded 25 tokens a second, 203 with it off (bench/engine/README.md).
  at::globalContext().setSDPUseCuDNN(false);
#endif
}

}  // namespace medq::engine
