#include "daemon/loop/responder.h"

#include <spdlog/spdlog.h>

namespace medq::daemon {

Responder::Responder(std::weak_ptr<ReplyChannel> connection, nlohmann::json id, std::string op,
                     Metrics* metrics)
    : connection_(std::move(connection)),
      id_(std::move(id)),
      op_(std::move(op)),
      metrics_(metrics) {
  if (auto c = connection_.lock()) c->BeginRequest();
}

Responder::Responder(Responder&& other) noexcept
    : connection_(std::move(other.connection_)),
      id_(std::move(other.id_)),
      op_(std::move(other.op_)),
      metrics_(other.metrics_),
      answered_(std::exchange(other.answered_, true)) {}

Responder::~Responder() {
  if (answered_) return;
  spdlog::error("op {}: request {} ended without a reply; answering INTERNAL", op_, id_.dump());
  Fail(Error(ErrorCode::kInternal, "the daemon dropped this request; see its log"));
}

void Responder::Event(const GenerateEvent& event) const {
  if (answered_) return;
  if (auto c = connection_.lock()) c->SendEvent(id_, event);
}

void Responder::Done(const GenerateDone& done) {
  if (answered_) return;
  if (auto c = connection_.lock()) c->SendDone(id_, done);
  Finish("ok");
}

void Responder::Embedded(const EmbedResult& result) {
  if (answered_) return;
  if (auto c = connection_.lock()) c->SendEmbedResult(id_, result);
  Finish("ok");
}

void Responder::Result(const nlohmann::json& result) {
  if (answered_) return;
  if (auto c = connection_.lock()) c->SendResult(id_, result);
  Finish("ok");
}

void Responder::OnClientGone(std::function<void()> hook) {
  auto c = connection_.lock();
  if (c == nullptr || c->closing()) {
    hook();
    return;
  }
  c->AddCloseHook(std::move(hook));
}

void Responder::Fail(const Error& error) {
  if (answered_) return;
  if (auto c = connection_.lock()) c->SendError(id_, error);
  Finish(ErrorCodeName(error.code));
}

void Responder::Finish(std::string_view outcome) {
  answered_ = true;
  if (metrics_ != nullptr) metrics_->CountRequest(op_, outcome);
  if (auto c = connection_.lock()) c->EndRequest();
}

std::string Responder::owner() const {
  auto c = connection_.lock();
  return c != nullptr ? c->owner() : std::string();
}

}  // namespace medq::daemon
