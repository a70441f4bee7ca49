#include "daemon/worker/choices.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

namespace medq::daemon {
namespace {

// What the choices' sinks share: the client's sink and what has ended.
struct Joined {
  GenerationSink sink;
  bool admitted = false;
  int remaining = 0;
  std::vector<std::optional<Result<GenerateDone>>> parts;
};

Result<GenerateDone> Combine(std::vector<std::optional<Result<GenerateDone>>>& parts) {
  std::vector<GenerateDone> done;
  for (auto& part : parts) {
    if (!part->ok()) return std::move(*part).error();
    done.push_back(std::move(*part).value());
  }
  return CombineChoices(std::move(done));
}

}  // namespace

GenerateDone CombineChoices(std::vector<GenerateDone> parts) {
  GenerateDone out = parts.front();
  out.usage.completion_tokens = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const GenerateDone& p = parts[i];
    ChoiceDone c;
    c.index = static_cast<int>(i);
    c.finish_reason = p.finish_reason;
    c.completion_tokens = p.usage.completion_tokens;
    c.tool_calls = p.tool_calls;
    c.content = p.content;
    out.choices.push_back(std::move(c));
    out.usage.completion_tokens += p.usage.completion_tokens;
    out.timings.decode_ms = std::max(out.timings.decode_ms, p.timings.decode_ms);
  }
  return out;
}

std::vector<GenerationSink> SplitSink(GenerationSink sink, int n) {
  auto joined = std::make_shared<Joined>();
  joined->sink = std::move(sink);
  joined->remaining = n;
  joined->parts.resize(static_cast<size_t>(n));
  std::vector<GenerationSink> out;
  for (int i = 0; i < n; ++i) {
    GenerationSink s;
    s.token = [joined, i](TokenEvent event) {
      event.index = i;
      joined->sink.token(std::move(event));
    };
    s.report = [joined](WorkerReport report) { joined->sink.report(std::move(report)); };
    s.admitted = [joined] {
      if (joined->admitted) return;
      joined->admitted = true;
      if (joined->sink.admitted) joined->sink.admitted();
    };
    s.done = [joined, i](Result<GenerateDone> done, WorkerReport report) {
      joined->parts[static_cast<size_t>(i)] = std::move(done);
      if (--joined->remaining > 0) return;
      joined->sink.done(Combine(joined->parts), std::move(report));
    };
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace medq::daemon
