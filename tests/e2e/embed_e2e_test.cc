// The embed op end to end: a real daemon, the tiny random-weight BERT and
// MPNet folders with sentence-transformers' reference vectors
// (tests/engine/data/embeddings), the real all-MiniLM-L6-v2 when
// scripts/setup-embedding-models installed it, the dynamic batcher, and
// embeddings beside a running generation.
#include <catch2/catch.hpp>
#include <cmath>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "ipc/client.h"
#include "tests/e2e/generate_client.h"
#include "tests/e2e/raw_client.h"
#include "tests/support/daemon_process.h"
#include "tests/support/fixtures.h"
#include "tests/support/model_repo.h"
#include "tests/support/skip.h"

namespace medq::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

const fs::path kData = fs::path(MEDQ_EMBEDDING_TEST_DATA);
const fs::path kMiniLm = fs::path(MEDQ_EMBEDDING_MODELS_DIR) / "all-MiniLM-L6-v2";

json ReadJson(const fs::path& path) {
  std::ifstream in(path);
  REQUIRE(in);
  return json::parse(in);
}

// The fixture generation models (ModelRepo) plus tiny-bert, tiny-mpnet and,
// when installed, all-MiniLM-L6-v2.
struct EmbedRepo {
  EmbedRepo() {
    repo.AddModel("tiny-bert", kData / "tiny-bert");
    repo.AddModel("tiny-mpnet", kData / "tiny-mpnet");
    if (fs::exists(kMiniLm / "model.safetensors")) {
      repo.AddModel("all-MiniLM-L6-v2", kMiniLm);
    }
  }
  bool has_minilm() const { return fs::exists(repo.dir() / "all-MiniLM-L6-v2"); }
  ModelRepo repo;
};

std::vector<std::string> EmbedArgs(const EmbedRepo& r, std::vector<std::string> extra = {},
                                   const std::string& embed_model = "tiny-bert") {
  std::vector<std::string> args = DaemonArgs(r.repo, {"--embed-model", embed_model});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

double CosineDistance(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double dot = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  return 1 - dot / std::sqrt(na * nb);
}

double MaxAbsDiff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i)
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
  return worst;
}

// A variant's reference vectors, by name, from a tiny-*.json file.
std::vector<std::vector<float>> Variant(const json& ref, const std::string& name) {
  for (const json& v : ref["variants"]) {
    if (v["name"] == name) return v["vectors"].get<std::vector<std::vector<float>>>();
  }
  FAIL("no variant " << name);
  return {};
}

json Embed(const std::string& socket, const json& params) {
  auto client = ipc::Client::Connect(socket);
  REQUIRE(client.ok());
  auto reply = client->Call("embed", params, 120s);
  REQUIRE(reply.ok());
  return *reply;
}

json EmbedOk(const std::string& socket, const json& params) {
  json reply = Embed(socket, params);
  INFO(reply.dump().substr(0, 400));
  REQUIRE(reply["event"] == "result");
  return reply["result"];
}

void RequireInvalid(const std::string& socket, const json& params, const std::string& field) {
  json reply = Embed(socket, params);
  INFO(params.dump() << " -> " << reply.dump());
  REQUIRE(reply["event"] == "error");
  CHECK(reply["code"] == "INVALID_REQUEST");
  CHECK(reply["message"].get<std::string>().find(field) != std::string::npos);
}

// The texts of a reference file that embed accepts (not empty or blank),
// with their indices.
std::vector<size_t> Embeddable(const json& ref) {
  std::vector<size_t> out;
  for (size_t i = 0; i < ref["texts"].size(); ++i) {
    const std::string t = ref["texts"][i];
    if (t.find_first_not_of(" \t\n\r\f\v") != std::string::npos) out.push_back(i);
  }
  return out;
}

std::string Metric(const std::string& socket, const std::string& series) {
  auto reply = ipc::Client::Connect(socket)->Call("metrics", {}, 5s);
  REQUIRE(reply.ok());
  const std::string text = (*reply)["result"]["text"];
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) return "";
  const size_t start = at + series.size() + 2;
  return text.substr(start, text.find('\n', start) - start);
}

}  // namespace

TEST_CASE("embed: tiny BERT and MPNet vectors equal sentence-transformers', in one request",
          "[e2e][embed]") {
  EmbedRepo r;
  DaemonProcess d(EmbedArgs(r));
  for (const char* model : {"tiny-bert", "tiny-mpnet"}) {
    INFO(model);
    const json ref = ReadJson(kData / (std::string(model) + ".json"));
    const auto want = Variant(ref, "mean+normalize");
    const auto unnormalized = Variant(ref, "mean");
    const std::vector<size_t> texts = Embeddable(ref);
    json input = json::array();
    for (size_t i : texts)
      input.push_back(ref["texts"][i]);
    // Texts of every length in one request: padded, bucketed batches.
    const json got = EmbedOk(d.socket(), {{"model", model}, {"input", input}});
    CHECK(got["model"] == model);
    CHECK(got["normalized"] == true);
    CHECK(got["dims"] == want.front().size());
    REQUIRE(got["embeddings"].size() == texts.size());
    for (size_t k = 0; k < texts.size(); ++k) {
      const size_t i = texts[k];
      INFO("text " << i);
      const auto v = got["embeddings"][k].get<std::vector<float>>();
      CHECK(CosineDistance(v, want[i]) < 1e-6);
      CHECK(MaxAbsDiff(v, want[i]) < 1e-5);
      CHECK(got["tokens"][k] == ref["ids"][i].size());
      if (ref["ids"][i].size() < ref["max_seq_length"]) CHECK(got["truncated"][k] == false);
    }
    // normalize false: the pooled vectors as they are (the folder without
    // its Normalize module).
    const json raw =
        EmbedOk(d.socket(), {{"model", model}, {"input", input}, {"normalize", false}});
    CHECK(raw["normalized"] == false);
    for (size_t k = 0; k < texts.size(); ++k) {
      const auto v = raw["embeddings"][k].get<std::vector<float>>();
      CHECK(MaxAbsDiff(v, unnormalized[texts[k]]) < 1e-5);
    }
  }
}

TEST_CASE("embed: dimensions keeps the first components and normalizes them again",
          "[e2e][embed]") {
  EmbedRepo r;
  DaemonProcess d(EmbedArgs(r));
  const json ref = ReadJson(kData / "tiny-bert.json");
  const auto raw = Variant(ref, "mean");
  const json got = EmbedOk(d.socket(), {{"input", ref["texts"][3]}, {"dimensions", 8}});
  CHECK(got["model"] == "tiny-bert");  // the daemon's embed_model
  CHECK(got["dims"] == 8);
  const auto v = got["embeddings"][0].get<std::vector<float>>();
  REQUIRE(v.size() == 8);
  double norm = 0;
  for (size_t j = 0; j < 8; ++j)
    norm += static_cast<double>(raw[3][j]) * raw[3][j];
  norm = std::sqrt(norm);
  for (size_t j = 0; j < 8; ++j)
    CHECK(v[j] == Approx(raw[3][j] / norm).margin(1e-6));
}

TEST_CASE("embed: concurrent clients share batches and each gets its own vectors", "[e2e][embed]") {
  EmbedRepo r;
  // A long timeout, so that the clients' texts meet in one batch.
  DaemonProcess d(EmbedArgs(r, {"--embed-batch-timeout-ms", "300", "--embed-max-batch", "32"}));
  const json ref = ReadJson(kData / "tiny-bert.json");
  const auto want = Variant(ref, "mean+normalize");
  const std::vector<size_t> texts = Embeddable(ref);
  std::vector<std::unique_ptr<RawClient>> clients;
  for (size_t k = 0; k < texts.size(); ++k) {
    clients.push_back(std::make_unique<RawClient>(d.socket()));
    json req = {
        {"v", 1}, {"id", k}, {"op", "embed"}, {"params", {{"input", ref["texts"][texts[k]]}}}};
    REQUIRE(clients.back()->Send(req.dump() + "\n"));
  }
  for (size_t k = 0; k < texts.size(); ++k) {
    auto reply = clients[k]->Read(60s);
    REQUIRE(reply.has_value());
    INFO(reply->dump().substr(0, 300));
    REQUIRE((*reply)["event"] == "result");
    CHECK((*reply)["id"] == k);
    const auto v = (*reply)["result"]["embeddings"][0].get<std::vector<float>>();
    CHECK(MaxAbsDiff(v, want[texts[k]]) < 1e-5);
  }
  // Fewer passes than texts: requests were grouped.
  const double batches = std::stod(Metric(d.socket(), "medq_embed_batches_total"));
  CHECK(batches >= 1);
  CHECK(batches < static_cast<double>(texts.size()) / 2);
  CHECK(std::stod(Metric(d.socket(), "medq_embed_texts_total")) == texts.size());
  CHECK(std::stod(Metric(d.socket(), "medq_embed_batch_size_count")) == batches);
}

TEST_CASE("embed: a request larger than a batch is split and put back in order", "[e2e][embed]") {
  EmbedRepo r;
  DaemonProcess d(EmbedArgs(r, {"--embed-max-batch", "4"}));
  const json ref = ReadJson(kData / "tiny-mpnet.json");
  const auto want = Variant(ref, "mean+normalize");
  const std::vector<size_t> texts = Embeddable(ref);
  json input = json::array();
  std::vector<size_t> order;
  for (int round = 0; round < 3; ++round) {  // 3 x 19 texts, in a scrambled order
    for (size_t k = 0; k < texts.size(); ++k) {
      const size_t i = texts[(k * 7 + static_cast<size_t>(round)) % texts.size()];
      input.push_back(ref["texts"][i]);
      order.push_back(i);
    }
  }
  const json got = EmbedOk(d.socket(), {{"model", "tiny-mpnet"}, {"input", input}});
  REQUIRE(got["embeddings"].size() == order.size());
  for (size_t k = 0; k < order.size(); ++k) {
    INFO("input " << k << " (text " << order[k] << ")");
    CHECK(MaxAbsDiff(got["embeddings"][k].get<std::vector<float>>(), want[order[k]]) < 1e-5);
  }
  CHECK(std::stod(Metric(d.socket(), "medq_embed_batches_total")) >=
        std::ceil(static_cast<double>(order.size()) / 4));
  CHECK(Metric(d.socket(), "medq_embed_batch_size_bucket{le=\"4\"}") ==
        Metric(d.socket(), "medq_embed_batch_size_count"));
}

TEST_CASE("embed: bad requests are INVALID_REQUEST naming the field", "[e2e][embed]") {
  EmbedRepo r;
  DaemonProcess d(EmbedArgs(r, {"--embed-max-inputs", "4"}));
  const std::string& s = d.socket();
  RequireInvalid(s, {{"input", ""}}, "params.input");
  RequireInvalid(s, {{"input", json::array({"fine", " \t\n"})}}, "params.input[1]");
  RequireInvalid(s, {{"input", json::array()}}, "params.input");
  RequireInvalid(s, {{"input", 5}}, "params.input");
  RequireInvalid(s, {{"input", json::array({"a", 5})}}, "params.input[1]");
  RequireInvalid(s, {}, "params.input");
  RequireInvalid(s, {{"input", json::array({"a", "b", "c", "d", "e"})}}, "embed_max_inputs");
  RequireInvalid(s, {{"input", "a"}, {"normalize", "yes"}}, "params.normalize");
  RequireInvalid(s, {{"input", "a"}, {"truncate", 1}}, "params.truncate");
  RequireInvalid(s, {{"input", "a"}, {"dimensions", 0}}, "params.dimensions");
  RequireInvalid(s, {{"input", "a"}, {"dimensions", 1.5}}, "params.dimensions");
  RequireInvalid(s, {{"input", "a"}, {"dimensions", 33}}, "params.dimensions");
  RequireInvalid(s, {{"input", "a"}, {"model", 7}}, "params.model");
  RequireInvalid(s, {{"input", "a"}, {"priority", "urgent"}}, "params.priority");
  RequireInvalid(s, {{"input", "a"}, {"queue_timeout_s", -1}}, "params.queue_timeout_s");
  RequireInvalid(s, {{"input", "a"}, {"verbose", true}}, "params.verbose");
  // Too long for tiny-bert's max_seq_length of 24, with truncate off.
  std::string long_text;
  for (int i = 0; i < 40; ++i)
    long_text += "w" + std::to_string(i % 60) + " ";
  RequireInvalid(s, {{"input", json::array({"w1", long_text})}, {"truncate", false}},
                 "params.input[1]");
  const json cut = EmbedOk(s, {{"input", long_text}});
  CHECK(cut["tokens"][0] == 24);
  CHECK(cut["truncated"][0] == true);
  // A model of the other kind, either way.
  RequireInvalid(s, {{"input", "a"}, {"model", "tiny-llama"}}, "generate op");
  auto gen =
      ipc::Client::Connect(s)->Call("generate", {{"model", "tiny-bert"}, {"prompt", "hi"}}, 30s);
  REQUIRE(gen.ok());
  CHECK((*gen)["code"] == "INVALID_REQUEST");
  CHECK((*gen)["message"].get<std::string>().find("embed op") != std::string::npos);
  const json missing = Embed(s, {{"input", "a"}, {"model", "no-such-model"}});
  CHECK(missing["code"] == "MODEL_NOT_FOUND");
  RequireHealthy(s);
}

TEST_CASE("embed: embeddings complete while a long generation runs", "[e2e][embed]") {
  EmbedRepo r;
  DaemonProcess d(EmbedArgs(r, {"--max-concurrent", "1"}));
  RawClient gen(d.socket());
  // Sampled from a random-weight model with a 128k vocabulary: it runs to
  // max_tokens (an end token is a 1-in-128k draw per step); cancelled below.
  SendGenerate(gen, "long",
               {{"model", "tiny-llama3"},
                {"prompt_ids", {128000, 1000, 1037}},
                {"max_tokens", 20000},
                {"temperature", 0.9},
                {"seed", 3}});
  bool streaming = false;
  for (int i = 0; i < 50 && !streaming; ++i) {
    auto e = gen.Read(30s);
    REQUIRE(e.has_value());
    REQUIRE((*e)["event"] != "error");
    streaming = (*e)["event"] == "token";
  }
  REQUIRE(streaming);
  // A second generation waits: the generation slot is taken.
  RawClient second(d.socket());
  SendGenerate(second, "second", {{"model", "tiny-llama3"}, {"prompt_ids", {128000, 1001}}});
  auto queued = second.Read(10s);
  REQUIRE(queued.has_value());
  CHECK((*queued)["event"] == "queued");
  // Embeddings go by meanwhile, each in well under the generation's time.
  const json ref = ReadJson(kData / "tiny-bert.json");
  const auto want = Variant(ref, "mean+normalize");
  for (int k = 0; k < 5; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    const json got = EmbedOk(d.socket(), {{"input", ref["texts"][5]}});
    CHECK(MaxAbsDiff(got["embeddings"][0].get<std::vector<float>>(), want[5]) < 1e-5);
    CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  }
  auto q = ipc::Client::Connect(d.socket())->Call("queue", {}, 5s);
  REQUIRE(q.ok());
  REQUIRE((*q)["result"]["running"].size() == 1);
  CHECK((*q)["result"]["running"][0]["job_class"] == "generate");
  auto cancel = ipc::Client::Connect(d.socket())
                    ->Call("cancel", {{"job", (*q)["result"]["running"][0]["job"]}}, 5s);
  REQUIRE(cancel.ok());
}

TEST_CASE("embed: a waiting or batching request is cancelled, the others go on", "[e2e][embed]") {
  EmbedRepo r;
  // One request in the batcher at a time, and a long wait for its batch.
  DaemonProcess d(EmbedArgs(
      r, {"--embed-max-concurrent", "1", "--embed-batch-timeout-ms", "3000", "--max-queue", "5"}));
  RawClient first(d.socket());
  RawClient second(d.socket());
  REQUIRE(first.Send(R"({"v":1,"id":1,"op":"embed","params":{"input":"w1 w2"}})"
                     "\n"));
  AwaitQueue(d.socket(), 1, 0);
  REQUIRE(second.Send(R"({"v":1,"id":2,"op":"embed","params":{"input":"w3"}})"
                      "\n"));
  AwaitQueue(d.socket(), 1, 1);
  auto q = ipc::Client::Connect(d.socket())->Call("queue", {}, 5s);
  REQUIRE(q.ok());
  const json& info = (*q)["result"];
  CHECK(info["running"][0]["job_class"] == "embed");
  CHECK(info["waiting"][0]["job_class"] == "embed");
  CHECK(info["waiting"][0]["position"] == 1);
  for (const json& job : {info["waiting"][0]["job"], info["running"][0]["job"]}) {
    auto c = ipc::Client::Connect(d.socket())->Call("cancel", {{"job", job}}, 5s);
    REQUIRE(c.ok());
    CHECK((*c)["event"] == "result");
  }
  for (RawClient* c : {&first, &second}) {
    auto e = c->Read(2s);  // well before the batch's 3 s
    REQUIRE(e.has_value());
    CHECK((*e)["code"] == "CANCELLED");
  }
  const json after = EmbedOk(d.socket(), {{"input", "w4"}});
  CHECK(after["embeddings"][0].size() == 32);
}

TEST_CASE("embed: health lists the embedding model, ready after its warm-up", "[e2e][embed]") {
  EmbedRepo r;
  DaemonProcess d(EmbedArgs(r, {"--preload", "tiny-mpnet"}));
  json health;
  for (int i = 0; i < 100; ++i) {
    auto h = ipc::Client::Connect(d.socket())->Call("health", {}, 5s);
    REQUIRE(h.ok());
    health = (*h)["result"];
    if (health["ready"] == true) break;
    std::this_thread::sleep_for(100ms);
  }
  REQUIRE(health["ready"] == true);
  REQUIRE(health["loaded_models"].size() == 1);
  const json& m = health["loaded_models"][0];
  CHECK(m["name"] == "tiny-mpnet");
  CHECK(m["kind"] == "embedding");
  CHECK(m["architecture"] == "MPNetModel");
  CHECK(m["dims"] == 32);
  CHECK(m["ready"] == true);
  CHECK(health["limits"]["embed_max_batch"] == 32);
  CHECK(health["limits"]["embed_batch_timeout_ms"] == 10);
  // A generation model loads beside it: the kinds count apart.
  auto gen = Generate(d.socket(), {{"model", "tiny-llama"}, {"prompt", "Hi"}, {"max_tokens", 2}});
  auto h = ipc::Client::Connect(d.socket())->Call("health", {}, 5s);
  REQUIRE(h.ok());
  CHECK((*h)["result"]["loaded_models"].size() == 2);
}

TEST_CASE("medq embed prints JSON lines, TSV and .npy, and - reads stdin lines", "[e2e][embed]") {
  EmbedRepo r;
  DaemonProcess d(EmbedArgs(r));
  const json ref = ReadJson(kData / "tiny-bert.json");
  const auto want = Variant(ref, "mean+normalize");
  const std::string a = ref["texts"][4];
  const std::string b = ref["texts"][9];
  ProcessResult jsonl = RunMedq(d.socket(), {"embed", a, b});
  REQUIRE(jsonl.status == 0);
  std::istringstream lines(jsonl.out);
  std::string line;
  std::vector<json> rows;
  while (std::getline(lines, line))
    rows.push_back(json::parse(line));
  REQUIRE(rows.size() == 2);
  CHECK(rows[1]["index"] == 1);
  CHECK(MaxAbsDiff(rows[0]["embedding"].get<std::vector<float>>(), want[4]) < 1e-6);
  CHECK(MaxAbsDiff(rows[1]["embedding"].get<std::vector<float>>(), want[9]) < 1e-6);
  CHECK(rows[0]["tokens"] == ref["ids"][4].size());

  ProcessResult tsv = RunProcess({std::string(MEDQ_BINARY_DIR) + "/cli/medq", "--socket",
                                  d.socket(), "embed", "--format", "tsv", "--dimensions", "4", "-"},
                                 {}, a + "\n" + b + "\n");
  REQUIRE(tsv.status == 0);
  std::istringstream tsv_lines(tsv.out);
  int n = 0;
  while (std::getline(tsv_lines, line)) {
    ++n;
    CHECK(std::count(line.begin(), line.end(), '\t') == 3);
  }
  CHECK(n == 2);

  ProcessResult npy = RunMedq(d.socket(), {"embed", "--format", "npy", a, b});
  REQUIRE(npy.status == 0);
  REQUIRE(npy.out.substr(0, 6) == "\x93NUMPY");
  const auto header_len = static_cast<size_t>(static_cast<unsigned char>(npy.out[8]) |
                                              (static_cast<unsigned char>(npy.out[9]) << 8));
  const std::string header = npy.out.substr(10, header_len);
  CHECK(header.find("'shape': (2, 32)") != std::string::npos);
  CHECK((10 + header_len) % 64 == 0);
  REQUIRE(npy.out.size() == 10 + header_len + 2 * 32 * sizeof(float));
  std::vector<float> second(32);
  std::memcpy(second.data(), npy.out.data() + 10 + header_len + 32 * sizeof(float),
              32 * sizeof(float));
  CHECK(MaxAbsDiff(second, want[9]) < 1e-6);

  ProcessResult bad = RunMedq(d.socket(), {"embed", "  "});
  CHECK(bad.status == 65);
  CHECK(bad.err.find("INVALID_REQUEST") != std::string::npos);
}

TEST_CASE("embed: all-MiniLM-L6-v2 through the daemon gives sentence-transformers' vectors",
          "[e2e][embed]") {
  EmbedRepo r;
  if (!r.has_minilm()) {
    MEDQ_SKIP("all-MiniLM-L6-v2 is not installed (scripts/setup-embedding-models)");
  }
  DaemonProcess d(EmbedArgs(r, {}, "all-MiniLM-L6-v2"));
  const json ref = ReadJson(kData / "all-MiniLM-L6-v2.json");
  const double quant = ref["quant"];
  const std::vector<size_t> texts = Embeddable(ref);
  // Every accepted text, in requests of 50 (batched, bucketed, truncated).
  double worst = 0;
  for (size_t start = 0; start < texts.size(); start += 50) {
    json input = json::array();
    const size_t end = std::min(texts.size(), start + 50);
    for (size_t k = start; k < end; ++k)
      input.push_back(ref["texts"][texts[k]]);
    const json got = EmbedOk(d.socket(), {{"input", input}});
    for (size_t k = start; k < end; ++k) {
      const size_t i = texts[k];
      INFO("text " << i);
      std::vector<float> want;
      for (const json& q : ref["vectors"][i])
        want.push_back(static_cast<float>(q.get<double>() * quant));
      const double dist =
          CosineDistance(got["embeddings"][k - start].get<std::vector<float>>(), want);
      worst = std::max(worst, dist);
      CHECK(dist < 1e-4);
      CHECK(got["tokens"][k - start] == ref["ids"][i].size());
    }
  }
  WARN("all-MiniLM-L6-v2 through medqd: max cosine distance " << worst << " over " << texts.size()
                                                              << " texts");
}

}  // namespace medq::test
