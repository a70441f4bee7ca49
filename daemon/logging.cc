#include "daemon/logging.h"

#include <cstdlib>
#include <memory>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace medq::daemon {
namespace {

// "%*" in the pattern: the sd-daemon priority prefix of the message's level.
class JournalPriorityFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    static constexpr const char* kPrefix[] = {"<7>", "<7>", "<6>", "<4>", "<3>", "<2>", "<6>"};
    const char* p = kPrefix[static_cast<int>(msg.level)];
    dest.append(p, p + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JournalPriorityFlag>();
  }
};

}  // namespace

bool SetUpLogging(const std::string& level) {
  auto logger = spdlog::stderr_logger_mt("medqd");
  const char* journal = std::getenv("JOURNAL_STREAM");
  auto formatter = std::make_unique<spdlog::pattern_formatter>();
  if (journal != nullptr && *journal != '\0') {
    formatter->add_flag<JournalPriorityFlag>('*').set_pattern("%*%v");
  } else {
    formatter->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%-5l%$ %v");
  }
  logger->set_formatter(std::move(formatter));
  spdlog::set_default_logger(logger);
  return SetLogLevel(level);
}

bool SetLogLevel(const std::string& level) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    spdlog::set_level(spdlog::level::info);
    return false;
  }
  spdlog::set_level(parsed);
  return true;
}

}  // namespace medq::daemon
