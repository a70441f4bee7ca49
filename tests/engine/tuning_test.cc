// The engine's diagnostic switches (daemon/engine/tuning.h): what each
// takes, and what medqd is told of a value it does not.
#include "daemon/engine/tuning.h"

#include <catch2/catch.hpp>
#include <string>

#include "tests/support/scoped_env.h"

namespace medq::engine::tuning {
namespace {

TEST_CASE("tuning: each switch takes its values and nothing else", "[engine]") {
  CHECK(ParseSwitch("1") == true);
  CHECK(ParseSwitch("0") == false);
  for (const char* bad : {"", "yes", "off", "01", " 0", "0 ", "2"}) {
    INFO(bad);
    CHECK_FALSE(ParseSwitch(bad).has_value());
  }

  CHECK(ParseAttentionSplits("auto") == kAttentionSplitsAuto);
  CHECK(ParseAttentionSplits("1") == 1);
  CHECK(ParseAttentionSplits("64") == 64);
  for (const char* bad : {"", "0", "65", "-1", "atuo", "Auto", "2x", "+2", "99999999999"}) {
    INFO(bad);
    CHECK_FALSE(ParseAttentionSplits(bad).has_value());
  }

  for (int n : {1, 2, 4, 8})
    CHECK(ParseGemvSplit(std::to_string(n)) == n);
  for (const char* bad : {"", "0", "3", "16", "four", "8.0"}) {
    INFO(bad);
    CHECK_FALSE(ParseGemvSplit(bad).has_value());
  }
}

using ::medq::test::ScopedEnv;

TEST_CASE("tuning: the environment's error names the variable and what it takes", "[engine]") {
  ScopedEnv graphs(kCudaGraphs, nullptr), fused(kFusedKernels, nullptr),
      splits(kAttentionSplits, nullptr), gemv(kGemvSplit, nullptr);
  CHECK(TuningEnvironmentError().empty());
  {
    ScopedEnv set(kAttentionSplits, "auto"), set2(kCudaGraphs, "0"), set3(kGemvSplit, "");
    CHECK(TuningEnvironmentError().empty());  // valid, and empty is unset
    CHECK_FALSE(SwitchOr(kCudaGraphs, true));
  }
  {
    ScopedEnv set(kAttentionSplits, "atuo");
    CHECK(TuningEnvironmentError() ==
          "MEDQ_ATTENTION_SPLITS=\"atuo\" is not valid: it takes auto or a number from 1 to 64");
  }
  {
    ScopedEnv set(kFusedKernels, "off");
    CHECK(TuningEnvironmentError() == "MEDQ_FUSED_KERNELS=\"off\" is not valid: it takes 0 or 1");
    CHECK(SwitchOr(kFusedKernels, true));  // the engine keeps its default
  }
  {
    ScopedEnv set(kGemvSplit, "3");
    CHECK(TuningEnvironmentError() == "MEDQ_GEMV_SPLIT=\"3\" is not valid: it takes 1, 2, 4 or 8");
  }
}

}  // namespace
}  // namespace medq::engine::tuning
