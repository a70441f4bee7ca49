// MEDQ_SKIP(reason): ends the current test case as skipped. The marker it
// prints makes CTest report the case as "Skipped" (SKIP_REGULAR_EXPRESSION,
// set by medq_add_test), so a test that cannot run here is never counted as
// passed. Catch2 v2 has no skip of its own.
#pragma once

#include <catch2/catch.hpp>

#define MEDQ_SKIP(reason)             \
  do {                                \
    WARN("MEDQ-SKIPPED: " << reason); \
    return;                           \
  } while (false)
