#include "bench/load/load_driver.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <thread>

#include "ipc/line_buffer.h"

namespace medq::bench {
namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

enum class Kind { kIdle, kGenerating, kGarbage, kHalfLine, kDisconnecting, kProbe, kPastLimit };

// The lines a garbage connection sends before its one well-formed request;
// each must get INVALID_REQUEST with a null id.
constexpr const char* kGarbage[] = {"{not json\n", "\x01\x02 garbage \xff\xfe\n", "[1,2,3]\n"};
constexpr int kGarbageLines = 3;

struct Conn {
  Kind kind = Kind::kIdle;
  int fd = -1;
  bool open = false;
  bool got_line = false;
  std::string out;  // bytes not yet written
  ipc::LineBuffer lines{1 << 20};
  std::map<int64_t, int> finals;  // request id -> final replies seen
  int null_errors = 0;            // INVALID_REQUEST replies with a null id
  int pending = 0;                // requests sent without a final reply yet
};

int Connect(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error("connect " + path + ": " + std::strerror(err));
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return fd;
}

std::string RequestLine(int64_t id, const std::string& op, const json& params) {
  return json{{"v", 1}, {"id", id}, {"op", op}, {"params", params}}.dump() + "\n";
}

class Driver {
 public:
  explicit Driver(const LoadOptions& o) : o_(o) {}

  LoadReport Run() {
    const auto start = Clock::now();
    Conn& probe = Add(Kind::kProbe);
    WaitUntilOnlyProbe(probe);
    OpenLoad();
    if (o_.probe_past_limit) {
      Add(Kind::kPastLimit);
      past_limit_deadline_ = Clock::now() + std::chrono::seconds(10);
    } else {
      limit_done_ = true;
    }
    Loop(probe, start);
    Tally();
    r_.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    for (auto& c : conns_) {
      if (c->open) ::close(c->fd);
    }
    return r_;
  }

 private:
  Conn& Add(Kind kind) {
    auto c = std::make_unique<Conn>();
    c->kind = kind;
    c->fd = Connect(o_.socket);
    c->open = true;
    conns_.push_back(std::move(c));
    return *conns_.back();
  }

  void Problem(std::string what) {
    if (r_.problems.size() < 20) r_.problems.push_back(std::move(what));
  }

  // Sends `op` on `c` and expects one final reply to it.
  int64_t Send(Conn& c, const std::string& op, const json& params) {
    const int64_t id = next_id_++;
    c.finals[id] = 0;
    ++c.pending;
    c.out += RequestLine(id, op, params);
    return id;
  }

  // Before the load: the daemon counts the probe alone, so that the
  // connection past the limit meets exactly connections + 1 open ones.
  void WaitUntilOnlyProbe(Conn& probe) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    for (;;) {
      const int64_t id = Send(probe, "health", json::object());
      std::optional<json> reply;
      while (!reply && Clock::now() < deadline) {
        Pump(1);
        reply = std::exchange(probe_reply_, std::nullopt);
        if (!probe.open) throw std::runtime_error("the daemon closed the probe connection");
      }
      if (!reply) throw std::runtime_error("health did not answer before the load");
      if ((*reply)["id"] != id) continue;
      if ((*reply)["result"]["connections"] == 1) return;
      if (Clock::now() >= deadline) throw std::runtime_error("connections did not drop to 1");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  void OpenLoad() {
    const int special = o_.generating + o_.garbage + o_.half_lines + o_.disconnecting;
    // Spread the busy connections among the idle ones.
    const int stride = special > 0 ? std::max(1, o_.connections / special) : 1;
    int gen = o_.generating, garbage = o_.garbage, half = o_.half_lines, cut = o_.disconnecting;
    for (int i = 0; i < o_.connections; ++i) {
      Kind kind = Kind::kIdle;
      if (i % stride == 0) {
        kind = gen-- > 0       ? Kind::kGenerating
               : garbage-- > 0 ? Kind::kGarbage
               : half-- > 0    ? Kind::kHalfLine
               : cut-- > 0     ? Kind::kDisconnecting
                               : Kind::kIdle;
      }
      Conn& c = Add(kind);
      ++r_.connected;
      switch (kind) {
        case Kind::kGenerating:
          SendGenerate(c);
          break;
        case Kind::kDisconnecting:
          Send(c, "generate",
               {{"prompt", "Once upon a time"}, {"max_tokens", o_.disconnect_max_tokens}});
          break;
        case Kind::kGarbage:
          for (const char* line : kGarbage)
            c.out += line;
          r_.garbage_lines += kGarbageLines;
          Send(c, "version", json::object());
          break;
        case Kind::kHalfLine:
          c.out += R"({"v":1,"id":1,"op":"heal)";
          break;
        default:
          break;
      }
      // Keep the daemon's backlog short and the replies flowing.
      if (i % 50 == 49) Pump(0);
    }
  }

  void SendGenerate(Conn& c) {
    Send(c, "generate", {{"prompt", "Hello"}, {"max_tokens", o_.max_tokens}});
    ++r_.generations;
  }

  // Every well-formed request of a connection still open has its final
  // reply, and the garbage has its errors.
  bool AllAnswered() const {
    for (const auto& c : conns_) {
      if (!c->open || c->kind == Kind::kDisconnecting || c->kind == Kind::kProbe) continue;
      for (const auto& [id, n] : c->finals)
        if (n == 0) return false;
      if (c->kind == Kind::kGarbage && c->null_errors < kGarbageLines) return false;
    }
    for (const auto& c : conns_)
      if (c->kind == Kind::kDisconnecting && c->open) return false;
    return limit_done_;
  }

  void Loop(Conn& probe, Clock::time_point start) {
    std::optional<int64_t> health_id;
    Clock::time_point health_sent, next_health = Clock::now();
    std::optional<Clock::time_point> done_at;
    for (;;) {
      const auto now = Clock::now();
      if (now - start > o_.timeout) {
        r_.timed_out = true;
        Problem("the load did not finish within the timeout");
        return;
      }
      if (!probe.open) {
        Problem("the daemon closed the probe connection");
        return;
      }
      if (!health_id && now >= next_health) {
        health_id = Send(probe, "health", json::object());
        health_sent = now;
      }
      if (std::optional<json> reply = std::exchange(probe_reply_, std::nullopt)) {
        if (health_id && (*reply)["id"] == *health_id) {
          r_.health_ms.push_back(
              std::chrono::duration<double, std::milli>(Clock::now() - health_sent).count());
          if ((*reply)["event"] == "result") {
            const int64_t rss = (*reply)["result"]["memory"]["rss_bytes"].get<int64_t>();
            if (r_.rss_start == 0) r_.rss_start = rss;
            r_.rss_peak = std::max(r_.rss_peak, rss);
            r_.rss_end = rss;
          } else {
            ++r_.health_errors;
          }
          health_id.reset();
          next_health = health_sent + o_.health_interval;
        }
      }
      if (!limit_done_ && now > past_limit_deadline_) {
        Problem("the connection past the limit got no reply and was not closed in 10 s");
        limit_done_ = true;
      }
      if (limit_done_) CutDisconnecting();
      if (!done_at && AllAnswered()) done_at = now;
      holding_ = done_at.has_value() && now - *done_at < o_.hold;
      if (holding_) KeepGenerating();
      if (done_at && !holding_ && AllAnswered() && !health_id) return;
      Pump(5);
    }
  }

  // While the load is held: each generating connection whose generation has
  // ended starts the next.
  void KeepGenerating() {
    for (auto& c : conns_) {
      if (c->kind == Kind::kGenerating && c->open && c->pending == 0) SendGenerate(*c);
    }
  }

  // Closes each disconnecting connection once it has heard from its
  // generation (queued, started or a token): a client gone mid-stream.
  void CutDisconnecting() {
    for (auto& c : conns_) {
      if (c->kind != Kind::kDisconnecting || !c->open || !c->got_line) continue;
      ::close(c->fd);
      c->open = false;
      ++r_.disconnected;
    }
  }

  // One poll() over every open connection: writes what is pending, reads
  // and handles what came.
  void Pump(int timeout_ms) {
    pfds_.clear();
    owners_.clear();
    for (auto& c : conns_) {
      if (!c->open) continue;
      pfds_.push_back({c->fd, static_cast<short>(POLLIN | (c->out.empty() ? 0 : POLLOUT)), 0});
      owners_.push_back(c.get());
    }
    if (::poll(pfds_.data(), pfds_.size(), timeout_ms) <= 0) return;
    for (size_t i = 0; i < pfds_.size(); ++i) {
      Conn& c = *owners_[i];
      if ((pfds_[i].revents & POLLOUT) != 0) Write(c);
      if ((pfds_[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && c.open) Read(c);
    }
  }

  void Write(Conn& c) {
    while (!c.out.empty()) {
      const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(0, static_cast<size_t>(n));
      } else {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        Closed(c);  // EPIPE: handled as the daemon's close
        return;
      }
    }
  }

  void Read(Conn& c) {
    char buf[16384];
    for (;;) {
      const ssize_t n = ::recv(c.fd, buf, sizeof(buf), 0);
      if (n > 0) {
        c.lines.Append(std::string_view(buf, static_cast<size_t>(n)));
        while (std::optional<std::string> line = c.lines.NextLine())
          OnLine(c, *line);
        continue;
      }
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
      Closed(c);
      return;
    }
  }

  void Closed(Conn& c) {
    ::close(c.fd);
    c.open = false;
    if (c.kind == Kind::kPastLimit) {
      r_.past_limit_closed = true;
      limit_done_ = true;
      return;
    }
    ++r_.unexpected_closes;
    Problem("the daemon closed a connection of kind " + std::to_string(static_cast<int>(c.kind)));
  }

  void OnLine(Conn& c, const std::string& line) {
    c.got_line = true;
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      Problem("a reply that is not a JSON object: " + line.substr(0, 200));
      return;
    }
    if (c.kind == Kind::kPastLimit) {
      r_.past_limit_reply = j;
      return;
    }
    const std::string event = j.value("event", "");
    const bool final = event == "result" || event == "done" || event == "error";
    if (!final) return;
    const json& id = j["id"];
    if (id.is_null()) {
      if (c.kind == Kind::kGarbage && j.value("code", "") == "INVALID_REQUEST") {
        ++c.null_errors;
        ++r_.garbage_errors;
      } else {
        Problem("a final reply with a null id: " + line.substr(0, 200));
      }
      return;
    }
    auto it = id.is_number_integer() ? c.finals.find(id.get<int64_t>()) : c.finals.end();
    if (it == c.finals.end()) {
      Problem("a reply to a request this connection never sent: " + line.substr(0, 200));
      return;
    }
    if (it->second++ == 0) --c.pending;
    if (c.kind == Kind::kProbe) probe_reply_ = std::move(j);
  }

  void Tally() {
    for (const auto& c : conns_) {
      if (c->kind == Kind::kDisconnecting || c->kind == Kind::kPastLimit) continue;
      for (const auto& [id, n] : c->finals) {
        ++r_.requests;
        if (n == 0) ++r_.unanswered;
        if (n == 1) ++r_.answered_once;
        if (n > 1) ++r_.answered_twice;
      }
    }
  }

  const LoadOptions& o_;
  LoadReport r_;
  std::vector<std::unique_ptr<Conn>> conns_;
  std::vector<pollfd> pfds_;
  std::vector<Conn*> owners_;
  int64_t next_id_ = 1;
  std::optional<json> probe_reply_;  // the probe's last final reply, not yet looked at
  bool limit_done_ = false;
  bool holding_ = false;  // the load is being held: generations go on
  Clock::time_point past_limit_deadline_;
};

}  // namespace

LoadReport RunLoad(const LoadOptions& options) {
  return Driver(options).Run();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1,
                    static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}

}  // namespace medq::bench
