// ShareWork: every chunk runs exactly once, whatever the helper count, and
// the caller sees the helpers' writes when it returns.
#include "daemon/engine/kernels/work_sharing.h"

#include <catch2/catch.hpp>

#include <vector>

namespace medq::engine::kernels {
namespace {

TEST_CASE("every chunk runs exactly once", "[work_sharing]") {
  for (int helpers : {0, 1, 3}) {
    for (int64_t chunks : {0, 1, 2, 7, 100}) {
      INFO("helpers " << helpers << " chunks " << chunks);
      for (int round = 0; round < 50; ++round) {
        std::vector<int> runs(static_cast<size_t>(chunks), 0);  // plain ints: the
        // caller must see the helpers' writes after ShareWork returns
        ShareWork(chunks, helpers, [&](int64_t c) { runs[static_cast<size_t>(c)] += 1; });
        for (int64_t c = 0; c < chunks; ++c)
          REQUIRE(runs[static_cast<size_t>(c)] == 1);
      }
    }
  }
}

}  // namespace
}  // namespace medq::engine::kernels
