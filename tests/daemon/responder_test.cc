// The Responder's contract (loop/responder.h) against a ReplyChannel that
// keeps what it is sent: exactly one final reply per request, typed replies
// passed through as they are, INTERNAL for a request dropped unanswered,
// nothing after the end, and the metrics counting each outcome once.
#include "daemon/loop/responder.h"

#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

namespace medq::daemon {
namespace {

using nlohmann::json;

// Keeps every reply as "kind:detail", in order.
class RecordingChannel : public ReplyChannel {
 public:
  void SendEvent(const json&, const GenerateEvent& event) override {
    sent.push_back("event:" + std::string(EventName(event)));
    events.push_back(event);
  }
  void SendDone(const json&, const GenerateDone& done) override {
    sent.push_back("done:" + FinishReasonName(done.finish_reason));
  }
  void SendEmbedResult(const json&, const EmbedResult& result) override {
    sent.push_back("embedded:" + std::to_string(result.embeddings.size()));
  }
  void SendResult(const json&, const json& result) override {
    sent.push_back("result:" + result.dump());
  }
  void SendError(const json&, const Error& error) override {
    sent.push_back("error:" + std::string(ErrorCodeName(error.code)));
  }
  void BeginRequest() override { ++begun; }
  void EndRequest() override { ++ended; }
  bool closing() const override { return closed; }
  void AddCloseHook(std::function<void()> hook) override { hooks.push_back(std::move(hook)); }
  std::string owner() const override { return "uid:7"; }

  std::vector<std::string> sent;
  std::vector<GenerateEvent> events;
  std::vector<std::function<void()>> hooks;
  int begun = 0;
  int ended = 0;
  bool closed = false;
};

TEST_CASE("a generation's typed replies reach the channel as they are, then end once",
          "[responder]") {
  auto channel = std::make_shared<RecordingChannel>();
  Metrics metrics;
  {
    Responder reply(channel, 1, "generate", &metrics);
    CHECK(channel->begun == 1);
    reply.Event(QueuedEvent{"j1", 1, 2, 0.5});
    reply.Event(StartedEvent{"j1"});
    TokenEvent token;
    token.text = "Hi";
    reply.Event(token);
    GenerateDone done;
    done.finish_reason = FinishReason::kLength;
    reply.Done(done);
    // After the final reply nothing more goes out.
    reply.Event(StartedEvent{"j1"});
    reply.Fail(Error(ErrorCode::kInternal, "late"));
    CHECK(channel->owner() == reply.owner());
  }
  CHECK(channel->sent ==
        std::vector<std::string>{"event:queued", "event:started", "event:token", "done:length"});
  REQUIRE(channel->events.size() == 3);
  CHECK(std::get<QueuedEvent>(channel->events[0]).queue_length == 2);
  CHECK(std::get<TokenEvent>(channel->events[2]).text == "Hi");
  CHECK(channel->ended == 1);
  CHECK_THAT(metrics.Render({}),
             Catch::Contains(R"(medq_requests_total{op="generate",outcome="ok"} 1)"));
}

TEST_CASE("a request dropped without a final reply is answered INTERNAL", "[responder]") {
  auto channel = std::make_shared<RecordingChannel>();
  Metrics metrics;
  { Responder reply(channel, 2, "tokenize", &metrics); }
  CHECK(channel->sent == std::vector<std::string>{"error:INTERNAL"});
  CHECK(channel->ended == 1);
  CHECK_THAT(metrics.Render({}),
             Catch::Contains(R"(medq_requests_total{op="tokenize",outcome="INTERNAL"} 1)"));
}

TEST_CASE("a moved Responder answers once, from where it went", "[responder]") {
  auto channel = std::make_shared<RecordingChannel>();
  {
    Responder first(channel, 3, "embed", nullptr);
    Responder second(std::move(first));
    EmbedResult result;
    result.embeddings = {{1.0f}, {2.0f}};
    second.Embedded(result);
  }
  CHECK(channel->sent == std::vector<std::string>{"embedded:2"});
  CHECK(channel->ended == 1);
}

TEST_CASE("replies to a client that has gone are dropped, and its hooks run at once",
          "[responder]") {
  auto channel = std::make_shared<RecordingChannel>();
  Responder reply(channel, 4, "generate", nullptr);
  bool ran = false;
  reply.OnClientGone([&ran] { ran = true; });
  CHECK_FALSE(ran);
  REQUIRE(channel->hooks.size() == 1);
  channel->hooks.front()();
  CHECK(ran);
  channel.reset();  // the connection is gone
  reply.Result(json{{"a", 1}});
  bool late = false;
  reply.OnClientGone([&late] { late = true; });
  CHECK(late);
  CHECK(reply.owner().empty());
}

}  // namespace
}  // namespace medq::daemon
