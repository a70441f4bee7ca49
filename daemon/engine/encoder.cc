#include "daemon/engine/encoder.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>

#include "daemon/engine/kernels/cpu_linear.h"
#include "daemon/engine/kernels/work_sharing.h"
#include "daemon/engine/torch_version.h"

namespace medq::engine {
namespace {

// The checkpoint's tensors under their BertModel / MPNetModel names: the
// "bert." / "mpnet." prefix a *ForMaskedLM-style save adds is dropped, and
// TF-era LayerNorm names (gamma, beta) become weight, bias as transformers
// renames them.
std::map<std::string, CheckpointTensor> Canonical(std::map<std::string, CheckpointTensor> in,
                                                  const std::string& prefix) {
  std::map<std::string, CheckpointTensor> out;
  for (auto& [name, t] : in) {
    std::string n = name.rfind(prefix, 0) == 0 ? name.substr(prefix.size()) : name;
    if (n.ends_with("LayerNorm.gamma")) n = n.substr(0, n.size() - 5) + "weight";
    if (n.ends_with("LayerNorm.beta")) n = n.substr(0, n.size() - 4) + "bias";
    out[n] = std::move(t);
  }
  return out;
}

class Taker {
 public:
  Taker(std::map<std::string, CheckpointTensor> tensors, at::Device device, at::ScalarType dtype)
      : tensors_(std::move(tensors)), device_(device), dtype_(dtype) {}

  Status Take(const std::string& name, at::IntArrayRef shape, at::Tensor* out) {
    return TakeTensor(tensors_, name, shape, device_, dtype_, out);
  }
  // name.weight [rows, cols] and name.bias [rows].
  Status Linear(const std::string& name, int64_t rows, int64_t cols, at::Tensor* w, at::Tensor* b) {
    const Status s = Take(name + ".weight", {rows, cols}, w);
    if (!s.ok()) return s;
    return Take(name + ".bias", {rows}, b);
  }
  // A LayerNorm: name.weight and name.bias, both [n].
  Status Norm(const std::string& name, int64_t n, at::Tensor* w, at::Tensor* b) {
    const Status s = Take(name + ".weight", {n}, w);
    if (!s.ok()) return s;
    return Take(name + ".bias", {n}, b);
  }
  // Every tensor not taken, except the pooler and buffers sentence-
  // transformers ignores too, is an error.
  Status CheckNoneLeft() const {
    return engine::CheckNoneLeft(tensors_, [](const std::string& name) {
      return name.rfind("pooler.", 0) == 0 || name == "embeddings.position_ids" ||
             name == "embeddings.token_type_ids";
    });
  }

 private:
  std::map<std::string, CheckpointTensor> tensors_;
  at::Device device_;
  at::ScalarType dtype_;
};

#define MEDQ_TAKE(expr)                        \
  do {                                         \
    const Status medq_s_ = (expr);             \
    if (!medq_s_.ok()) return medq_s_.error(); \
  } while (0)

at::Tensor LayerNorm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return at::layer_norm(x, {x.size(-1)}, w, b, eps);
}

// out = the activation of x, element for element (same shape).
void ActivationOut(const EncoderConfig& c, at::Tensor& out, const at::Tensor& x) {
  switch (c.activation) {
    case EncoderActivation::kGeluTanh:
      at::gelu_out(out, x, "tanh");
      return;
    case EncoderActivation::kRelu:
      at::clamp_min_out(out, x, 0);
      return;
    case EncoderActivation::kGelu:
      break;
  }
  at::gelu_out(out, x);
}

// Runs fn(begin, end) over [0, units) in up to `threads` chunks, on the
// calling thread and the kernels' helper threads (kernels::ShareWork), for
// LibTorch ops on slices while LibTorch's own pool has one thread; inline
// when threads <= 1. A chunk's exception is rethrown on the caller.
void ForChunks(int64_t units, int threads, const std::function<void(int64_t, int64_t)>& fn) {
  if (threads <= 1 || units < 2) {
    fn(0, units);
    return;
  }
  const int64_t chunks = std::min<int64_t>(units, threads);
  // std::mutex, not medq::Mutex: a local the analysis could not check, in a
  // file clang cannot compile (LibTorch 1.13's headers as C++20).
  std::mutex mu;
  std::exception_ptr error;
  kernels::ShareWork(chunks, threads - 1, [&](int64_t i) {
    try {
      c10::InferenceMode inference_mode;  // thread-local: the helpers need it too
      // LibTorch gives a thread its OpenMP width (one, after
      // InitWorkerThread) on the thread's first parallel op; oneDNN's kernels
      // (the GELU) read the width without that, and on a fresh helper thread
      // started an OpenMP team of one thread per core, whose spinning
      // starved BLAS's threads. This call sets it.
      (void)at::get_num_threads();
      fn(units * i / chunks, units * (i + 1) / chunks);
    } catch (...) {
      const std::lock_guard<std::mutex> lock(mu);
      if (!error) error = std::current_exception();
    }
  });
  if (error) std::rethrow_exception(error);
}

// Splitting an op over fewer elements than this costs more in waking a
// helper than it saves.
constexpr int64_t kMinWorkToSplit = int64_t{1} << 16;

// LibTorch's intra-op pool at the kernels' width for one forward pass on the
// CPU, back to what it was after (one thread after InitWorkerThread), when
// LibTorch's BLAS is MKL (PyPI's LibTorch): MKL then follows
// at::set_num_threads and threads through the same OpenMP pool, so with one
// thread every GEMM, and the layer norms, softmax and element-wise ops, run on
// one core (half the throughput on 2 cores). With another BLAS (Debian's
// LibTorch with OpenBLAS, whose GEMMs keep their own threads) the pool stays
// at one thread: its workers, spinning after each region, starved OpenBLAS's
// threads (3 to 5x slower on 2 cores).
class WideIntraOpThreads {
 public:
  explicit WideIntraOpThreads(bool cpu)
      : previous_(at::get_num_threads()),
        wanted_(cpu && at::globalContext().hasMKL() ? std::max(previous_, kernels::KernelThreads())
                                                    : previous_) {
    if (wanted_ != previous_) at::set_num_threads(wanted_);
  }
  bool widened() const { return wanted_ != previous_; }
  ~WideIntraOpThreads() {
    if (wanted_ != previous_) at::set_num_threads(previous_);
  }
  WideIntraOpThreads(const WideIntraOpThreads&) = delete;
  WideIntraOpThreads& operator=(const WideIntraOpThreads&) = delete;

 private:
  const int previous_;
  const int wanted_;
};

}  // namespace

Result<EncoderWeights> BuildEncoderWeights(const EncoderConfig& c,
                                           std::map<std::string, CheckpointTensor> tensors,
                                           at::Device device, at::ScalarType dtype) {
  const bool bert = c.arch == EncoderArch::kBert;
  Taker t(Canonical(std::move(tensors), bert ? "bert." : "mpnet."), device, dtype);
  EncoderWeights w;
  const int64_t h = c.hidden_size, inter = c.intermediate_size;
  MEDQ_TAKE(t.Take("embeddings.word_embeddings.weight", {c.vocab_size, h}, &w.word));
  MEDQ_TAKE(
      t.Take("embeddings.position_embeddings.weight", {c.max_position_embeddings, h}, &w.position));
  if (bert) {
    MEDQ_TAKE(
        t.Take("embeddings.token_type_embeddings.weight", {c.type_vocab_size, h}, &w.token_type));
  } else {
    MEDQ_TAKE(t.Take("encoder.relative_attention_bias.weight",
                     {c.relative_attention_num_buckets, c.num_heads}, &w.relative_bias));
  }
  MEDQ_TAKE(t.Norm("embeddings.LayerNorm", h, &w.embed_norm, &w.embed_norm_bias));
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    EncoderLayerWeights& l = w.layers[static_cast<size_t>(i)];
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    at::Tensor q, k, v, qb, kb, vb;
    if (bert) {
      MEDQ_TAKE(t.Linear(p + "attention.self.query", h, h, &q, &qb));
      MEDQ_TAKE(t.Linear(p + "attention.self.key", h, h, &k, &kb));
      MEDQ_TAKE(t.Linear(p + "attention.self.value", h, h, &v, &vb));
      MEDQ_TAKE(t.Linear(p + "attention.output.dense", h, h, &l.out, &l.out_bias));
      MEDQ_TAKE(t.Norm(p + "attention.output.LayerNorm", h, &l.attn_norm, &l.attn_norm_bias));
    } else {
      MEDQ_TAKE(t.Linear(p + "attention.attn.q", h, h, &q, &qb));
      MEDQ_TAKE(t.Linear(p + "attention.attn.k", h, h, &k, &kb));
      MEDQ_TAKE(t.Linear(p + "attention.attn.v", h, h, &v, &vb));
      MEDQ_TAKE(t.Linear(p + "attention.attn.o", h, h, &l.out, &l.out_bias));
      MEDQ_TAKE(t.Norm(p + "attention.LayerNorm", h, &l.attn_norm, &l.attn_norm_bias));
    }
    // One projection for q, k and v: one GEMM instead of three.
    l.qkv = at::cat({q, k, v}, 0).contiguous();
    l.qkv_bias = at::cat({qb, kb, vb}, 0).contiguous();
    MEDQ_TAKE(t.Linear(p + "intermediate.dense", inter, h, &l.up, &l.up_bias));
    MEDQ_TAKE(t.Linear(p + "output.dense", h, inter, &l.down, &l.down_bias));
    MEDQ_TAKE(t.Norm(p + "output.LayerNorm", h, &l.out_norm, &l.out_norm_bias));
  }
  MEDQ_TAKE(t.CheckNoneLeft());
  return w;
}

int64_t EncoderParameterBytes(const EncoderWeights& w) {
  int64_t total = 0;
  const auto add = [&](const at::Tensor& t) {
    if (t.defined()) total += static_cast<int64_t>(t.numel() * t.element_size());
  };
  for (const at::Tensor* t :
       {&w.word, &w.position, &w.token_type, &w.embed_norm, &w.embed_norm_bias, &w.relative_bias}) {
    add(*t);
  }
  for (const auto& l : w.layers) {
    for (const at::Tensor* t :
         {&l.qkv, &l.qkv_bias, &l.out, &l.out_bias, &l.attn_norm, &l.attn_norm_bias, &l.up,
          &l.up_bias, &l.down, &l.down_bias, &l.out_norm, &l.out_norm_bias}) {
      add(*t);
    }
  }
  return total;
}

at::Tensor MpnetRelativeBuckets(int64_t length, at::Device device) {
  // relative_position_bucket(memory - context), bidirectional: half the
  // buckets for each sign, exact below max_exact, logarithmic up to 128.
  constexpr int64_t kHalf = kMpnetBuckets / 2;
  constexpr int64_t kMaxExact = kHalf / 2;
  constexpr double kMaxDistance = 128;
  const auto opts = at::TensorOptions().dtype(at::kLong).device(device);
  const at::Tensor pos = at::arange(length, opts);
  const at::Tensor n = pos.view({-1, 1}) - pos.view({1, -1});  // -(memory - context)
  at::Tensor ret = (n < 0).to(at::kLong) * kHalf;
  const at::Tensor a = n.abs();
  // As transformers: log in float32 of n / max_exact, truncated toward zero.
  const at::Tensor large = (at::log(a.to(at::kFloat) / static_cast<float>(kMaxExact)) /
                            static_cast<float>(std::log(kMaxDistance / kMaxExact)) *
                            static_cast<float>(kHalf - kMaxExact))
                               .to(at::kLong) +
                           kMaxExact;
  const at::Tensor capped = at::minimum(large, at::full_like(large, kHalf - 1));
  return ret + at::where(a < kMaxExact, a, capped);
}

at::Tensor EncoderForward(const EncoderConfig& c, const EncoderWeights& w, const at::Tensor& ids,
                          const at::Tensor& mask) {
  const bool cpu = ids.device().is_cpu();
  const WideIntraOpThreads wide(cpu);
  // On the CPU with LibTorch's pool at one thread, the large ops BLAS does
  // not run (the softmax, the activation) are split over the kernels'
  // threads here.
  const int split =
      cpu && !wide.widened() && at::get_num_threads() == 1 ? kernels::KernelThreads() : 1;
  const int64_t b = ids.size(0), t = ids.size(1), heads = c.num_heads, d = c.head_dim;
  at::Tensor x = at::embedding(w.word, ids);
  if (c.arch == EncoderArch::kBert) {
    // Absolute positions 0 .. T-1 and token type 0 for every token, as
    // transformers' BertEmbeddings without token_type_ids.
    x = x + w.position.narrow(0, 0, t).unsqueeze(0) + w.token_type[0];
  } else {
    // transformers' create_position_ids_from_input_ids: real tokens count up
    // from padding_idx + 1; ids equal to padding_idx (Embed pads with it) get
    // padding_idx.
    const at::Tensor real = ids.ne(kMpnetPaddingIdx).to(at::kLong);
    x = x + at::embedding(w.position, real.cumsum(1) * real + kMpnetPaddingIdx);
  }
  x = LayerNorm(x, w.embed_norm, w.embed_norm_bias, c.layer_norm_eps);

  // Scores are computed in float32 whatever the weights' dtype; padded keys
  // get -inf (every row has a real key, so no row is all -inf). A CPU batch
  // without padding skips the mask (on a GPU the check would synchronize).
  const bool padded = !cpu || mask.min().item<int64_t>() == 0;
  at::Tensor padded_keys;  // [B * heads, 1, T]
  if (padded)
    padded_keys = mask.eq(0).view({b, 1, 1, t}).expand({b, heads, 1, t}).reshape({-1, 1, t});
  at::Tensor position_bias;
  if (c.arch == EncoderArch::kMpnet) {
    position_bias = at::embedding(w.relative_bias, MpnetRelativeBuckets(t, ids.device()))
                        .permute({2, 0, 1})
                        .unsqueeze(0)
                        .to(at::kFloat);  // [1, heads, T, T]
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const int64_t rows = b * heads;  // one attention matrix per sequence and head
  // Rows go to chunks by whole sequences when the position bias ([heads, T,
  // T]) is added per sequence.
  const int64_t unit = position_bias.defined() ? heads : 1;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // probs[r0, r1) = softmax of scores[r0, r1), after the position bias and
  // the mask (both in place).
  const auto softmax_rows = [&](at::Tensor& probs, at::Tensor& scores, int64_t r0, int64_t r1) {
    at::Tensor s = scores.slice(0, r0, r1);
    if (position_bias.defined()) s.view({(r1 - r0) / heads, heads, t, t}).add_(position_bias);
    if (padded) s.masked_fill_(padded_keys.slice(0, r0, r1), neg_inf);
    at::Tensor p = probs.slice(0, r0, r1);
    at::_softmax_out(p, s, -1, false);
  };
#if MEDQ_TORCH_AT_LEAST(2, 0)
  // On the CPU, LibTorch 2's fused attention (what transformers uses too):
  // no [B, heads, T, T] scores in memory, and all of it on LibTorch's threads.
  // The mask: padded keys excluded (boolean, true = attend), or for MPNet the
  // position bias with -inf on padded keys (added to the scores).
  const bool fused = cpu;
  c10::optional<at::Tensor> fused_mask;
  if (fused && position_bias.defined()) {
    fused_mask =
        padded
            ? position_bias.masked_fill(mask.eq(0).view({b, 1, 1, t}), neg_inf).to(x.scalar_type())
            : position_bias.to(x.scalar_type());
  } else if (fused && padded) {
    fused_mask = mask.ne(0).view({b, 1, 1, t});
  }
#else
  const bool fused = false;
#endif
  for (const EncoderLayerWeights& l : w.layers) {
    const at::Tensor qkv =
        at::linear(x, l.qkv, l.qkv_bias).view({b, t, 3, heads, d}).permute({2, 0, 3, 1, 4});
    at::Tensor context;
    if (fused) {
#if MEDQ_TORCH_AT_LEAST(2, 0)
      context = at::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], fused_mask, 0.0, false)
                    .permute({0, 2, 1, 3})
                    .reshape({b, t, -1});  // [B, heads, T, D] -> [B, T, H]
#endif
    } else {
      // [B * heads, T, D] each; the scale goes on q (T x D) rather than on the
      // scores (T x T).
      const at::Tensor q = (qkv[0] * scale).reshape({rows, t, d});
      const at::Tensor k = qkv[1].reshape({rows, t, d});
      const at::Tensor v = qkv[2].reshape({rows, t, d});
      at::Tensor scores = at::bmm(q, k.transpose(1, 2)).to(at::kFloat);  // [B * heads, T, T]
      at::Tensor probs = at::empty_like(scores);
      ForChunks(rows / unit, scores.numel() >= kMinWorkToSplit ? split : 1,
                [&](int64_t u0, int64_t u1) { softmax_rows(probs, scores, u0 * unit, u1 * unit); });
      context = at::bmm(probs.to(x.scalar_type()), v)
                    .view({b, heads, t, d})
                    .permute({0, 2, 1, 3})
                    .reshape({b, t, -1});
    }
    x = LayerNorm(at::linear(context, l.out, l.out_bias) + x, l.attn_norm, l.attn_norm_bias,
                  c.layer_norm_eps);
    const at::Tensor up = at::linear(x, l.up, l.up_bias).view({b * t, -1});
    at::Tensor act = at::empty_like(up);
    ForChunks(b * t, up.numel() >= kMinWorkToSplit ? split : 1, [&](int64_t r0, int64_t r1) {
      at::Tensor out = act.slice(0, r0, r1);
      ActivationOut(c, out, up.slice(0, r0, r1));
    });
    x = LayerNorm(at::linear(act.view({b, t, -1}), l.down, l.down_bias) + x, l.out_norm,
                  l.out_norm_bias, c.layer_norm_eps);
  }
  return x;
}

}  // namespace medq::engine
