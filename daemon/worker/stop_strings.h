// Stop strings for streamed text: passes text through, holding back only
// what could still become the start of a stop string, and reports when one
// appears. The stop string and everything after it are never emitted.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace medq::daemon {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Adds generated text; returns the text that is now safe to emit.
  std::string Push(std::string_view text);
  // The end of the stream: returns whatever was held back (nothing after a stop).
  std::string Finish();
  // True once a stop string has appeared; Push then returns nothing more.
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;  // text not emitted yet
  bool stopped_ = false;
};

}  // namespace medq::daemon
