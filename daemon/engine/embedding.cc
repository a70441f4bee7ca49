// The embedding facade: options, the loading order of a sentence-transformers
// folder, the padded batch, and the one place where exceptions from the
// encoder become medq::Error values.
#include "daemon/engine/embedding.h"

#include <c10/core/InferenceMode.h>

#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "common/file_read.h"
#include "daemon/engine/checkpoint.h"
#include "daemon/engine/device_name.h"
#include "daemon/engine/encoder.h"
#include "daemon/engine/encoder_config.h"
#include "daemon/engine/pooling.h"
#include "daemon/engine/sentence_transformers.h"
#include "daemon/engine/status_macros.h"
#include "daemon/engine/torch_errors.h"

namespace medq::engine {

class EmbeddingModel {
 public:
  std::filesystem::path dir;
  EncoderConfig config;
  EncoderWeights weights;
  PoolingConfig pooling;
  at::Device device = at::kCPU;
  EmbeddingInfo info;
};

namespace {

namespace fs = std::filesystem;

// The dtype weights and activations both use. "auto": float32 on the CPU
// (embedding checkpoints are small and float32 keeps encode()'s numbers),
// the checkpoint's dtype on CUDA. On the CPU "bf16" runs the encoder in
// bf16 (pooling stays float32); "fp16" is refused there.
Result<at::ScalarType> Dtype(const LoadOptions& o, at::Device device, const EncoderConfig& c) {
  const bool cpu = device.is_cpu();
  if (o.dtype == "auto") {
    if (cpu) return at::kFloat;
    if (c.torch_dtype == "bfloat16") return at::kBFloat16;
    if (c.torch_dtype == "float16") return at::kHalf;
    return at::kFloat;
  }
  if (o.dtype == "fp32") return at::kFloat;
  if (o.dtype == "bf16") return at::kBFloat16;
  if (o.dtype == "fp16") {
    if (cpu) {
      return Error(ErrorCode::kInvalidRequest,
                   "dtype fp16 is not supported on cpu; use fp32 or bf16 there");
    }
    return at::kHalf;
  }
  return Error(ErrorCode::kInvalidRequest,
               "dtype '" + o.dtype + "' is not one of auto, bf16, fp16, fp32");
}

// A folder whose weights exist only as a pickle gets told how to convert them
// instead of "no weights file": the engine reads safetensors only.
Status CheckWeightsFormat(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "model.safetensors", ec) ||
      fs::exists(dir / "model.safetensors.index.json", ec)) {
    return Status::Ok();
  }
  if (fs::exists(dir / "pytorch_model.bin", ec) ||
      fs::exists(dir / "pytorch_model.bin.index.json", ec)) {
    return Error(ErrorCode::kInvalidRequest,
                 "model directory " + dir.string() +
                     " holds only pytorch_model.bin; medq reads safetensors only: convert it "
                     "to model.safetensors (e.g. load it with transformers and "
                     "save_pretrained(dir, safe_serialization=True))");
  }
  return Status::Ok();  // ReadCheckpoint names what is missing
}

Result<std::shared_ptr<const EmbeddingModel>> LoadEmbedding(const fs::path& dir,
                                                            const LoadOptions& o) {
  c10::InferenceMode inference_mode;
  auto model = std::make_shared<EmbeddingModel>();
  model->dir = dir;
  SentenceTransformersLayout layout;
  MEDQ_ASSIGN_OR_RETURN(layout, ReadSentenceTransformersLayout(dir));
  MEDQ_ASSIGN_OR_RETURN(model->config, LoadEncoderConfig(layout.encoder_dir));
  const EncoderConfig& c = model->config;
  if (layout.pooling.embedding_dimension != 0 &&
      layout.pooling.embedding_dimension != c.hidden_size) {
    return Error(ErrorCode::kInvalidRequest,
                 "the Pooling config of " + dir.string() + " expects token embeddings of " +
                     std::to_string(layout.pooling.embedding_dimension) +
                     ", the encoder's hidden_size is " + std::to_string(c.hidden_size));
  }
  at::Device device = at::kCPU;
  MEDQ_ASSIGN_OR_RETURN(device, ParseDevice(o.device));
  at::ScalarType dtype = at::kFloat;
  MEDQ_ASSIGN_OR_RETURN(dtype, Dtype(o, device, c));
  MEDQ_RETURN_IF_ERROR(CheckWeightsFormat(layout.encoder_dir));
  std::map<std::string, CheckpointTensor> tensors;
  MEDQ_ASSIGN_OR_RETURN(tensors, ReadCheckpoint(layout.encoder_dir));
  MEDQ_ASSIGN_OR_RETURN(model->weights, BuildEncoderWeights(c, std::move(tensors), device, dtype));
  model->pooling = layout.pooling;
  model->device = device;

  EmbeddingInfo& info = model->info;
  info.architecture = c.architecture;
  info.device = DeviceName(device);
  info.dtype = DtypeName(dtype);
  info.dims = c.hidden_size * static_cast<int64_t>(layout.pooling.modes.size());
  info.vocab_size = c.vocab_size;
  info.max_seq_length = std::min(layout.max_seq_length.value_or(c.MaxSequence()), c.MaxSequence());
  info.pooling = PoolingName(layout.pooling);
  info.normalize = layout.normalize;
  info.do_lower_case = layout.do_lower_case;
  info.include_prompt = layout.pooling.include_prompt;
  info.parameter_bytes = EncoderParameterBytes(model->weights);
  info.tokenizer_dir = layout.encoder_dir;
  return std::shared_ptr<const EmbeddingModel>(std::move(model));
}

Status CheckBatch(const EmbeddingModel& m, const std::vector<std::vector<int32_t>>& ids) {
  for (size_t i = 0; i < ids.size(); ++i) {
    const auto& seq = ids[i];
    const std::string which = "sequence " + std::to_string(i);
    if (seq.empty()) {
      return Error(ErrorCode::kInvalidRequest,
                   which + " is empty; it needs at least one id (the special tokens)");
    }
    if (static_cast<int64_t>(seq.size()) > m.info.max_seq_length) {
      return Error(ErrorCode::kInvalidRequest,
                   which + " has " + std::to_string(seq.size()) + " ids, more than the model's " +
                       "max_seq_length " + std::to_string(m.info.max_seq_length) +
                       "; truncate it first");
    }
    for (const int32_t id : seq) {
      if (id < 0 || id >= m.info.vocab_size) {
        return Error(ErrorCode::kInvalidRequest, which + " holds id " + std::to_string(id) +
                                                     ", outside the vocabulary [0, " +
                                                     std::to_string(m.info.vocab_size) + ")");
      }
    }
  }
  return Status::Ok();
}

Result<std::vector<std::vector<float>>> RunEmbed(const EmbeddingModel& m,
                                                 const std::vector<std::vector<int32_t>>& ids,
                                                 bool normalize) {
  MEDQ_RETURN_IF_ERROR(CheckBatch(m, ids));
  std::vector<std::vector<float>> out;
  if (ids.empty()) return out;
  c10::InferenceMode inference_mode;
  const int64_t b = static_cast<int64_t>(ids.size());
  int64_t t = 0;
  for (const auto& seq : ids)
    t = std::max(t, static_cast<int64_t>(seq.size()));
  // Right padding: real tokens first, as the pooling and MPNet's position ids
  // expect. MPNet pads with its padding index so that position ids come out
  // as transformers computes them.
  const int64_t pad =
      m.config.arch == EncoderArch::kMpnet ? kMpnetPaddingIdx : m.config.pad_token_id;
  at::Tensor host_ids = at::full({b, t}, pad, at::kLong);
  at::Tensor host_mask = at::zeros({b, t}, at::kLong);
  auto id_acc = host_ids.accessor<int64_t, 2>();
  auto mask_acc = host_mask.accessor<int64_t, 2>();
  for (int64_t i = 0; i < b; ++i) {
    const auto& seq = ids[static_cast<size_t>(i)];
    for (size_t j = 0; j < seq.size(); ++j) {
      id_acc[i][static_cast<int64_t>(j)] = seq[j];
      mask_acc[i][static_cast<int64_t>(j)] = 1;
    }
  }
  const at::Tensor dev_ids = host_ids.to(m.device);
  const at::Tensor dev_mask = host_mask.to(m.device);
  const at::Tensor hidden = EncoderForward(m.config, m.weights, dev_ids, dev_mask);
  at::Tensor pooled = Pool(m.pooling, hidden, dev_mask);  // float32 [B, dims]
  if (normalize) {
    // torch.nn.functional.normalize(p=2, dim=1): x / max(||x||, 1e-12).
    pooled = pooled / pooled.norm(2, {1}, true).clamp_min(1e-12);
  }
  const at::Tensor host = pooled.to(at::kCPU).contiguous();
  const int64_t dims = host.size(1);
  out.resize(static_cast<size_t>(b));
  for (int64_t i = 0; i < b; ++i) {
    auto& v = out[static_cast<size_t>(i)];
    v.resize(static_cast<size_t>(dims));
    std::memcpy(v.data(), host[i].data_ptr<float>(), static_cast<size_t>(dims) * sizeof(float));
  }
  return out;
}

}  // namespace

Result<std::shared_ptr<const EmbeddingModel>> LoadEmbeddingModel(const fs::path& dir,
                                                                 const LoadOptions& options) {
  try {
    return LoadEmbedding(dir, options);
  } catch (...) {
    return ErrorFromCurrentException("loading embedding model " + dir.string());
  }
}

bool IsEmbeddingModelDir(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "modules.json", ec)) return true;
  // Regular files only, never blocking (a FIFO here held a pool thread).
  auto text = ReadWholeFile(dir / "config.json");
  if (!text.ok()) return false;
  const nlohmann::json config = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!config.is_object()) return false;
  static constexpr std::string_view kEncoderTypes[] = {"bert",        "mpnet",      "roberta",
                                                       "xlm-roberta", "distilbert", "electra",
                                                       "deberta",     "deberta-v2", "nomic_bert"};
  if (const auto type = config.find("model_type"); type != config.end() && type->is_string()) {
    for (std::string_view t : kEncoderTypes) {
      if (type->get_ref<const std::string&>() == t) return true;
    }
  }
  if (const auto archs = config.find("architectures");
      archs != config.end() && archs->is_array() && !archs->empty() && archs->front().is_string()) {
    const std::string& arch = archs->front().get_ref<const std::string&>();
    return arch == "BertModel" || arch == "MPNetModel";
  }
  return false;
}

const EmbeddingInfo& Info(const EmbeddingModel& model) {
  return model.info;
}

Result<std::vector<std::vector<float>>> Embed(const EmbeddingModel& model,
                                              const std::vector<std::vector<int32_t>>& ids) {
  return Embed(model, ids, model.info.normalize);
}

Result<std::vector<std::vector<float>>> Embed(const EmbeddingModel& model,
                                              const std::vector<std::vector<int32_t>>& ids,
                                              bool normalize) {
  try {
    return RunEmbed(model, ids, normalize);
  } catch (...) {
    return ErrorFromCurrentException("embedding with model " + model.dir.string());
  }
}

}  // namespace medq::engine
