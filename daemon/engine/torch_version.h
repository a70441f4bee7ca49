// Compile-time checks of the LibTorch version, for the few places where the
// engine uses an API newer than Debian's 1.13 (or one that moved).
#pragma once

#include <torch/version.h>

// True when this LibTorch is `major`.`minor` or later.
#define MEDQ_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||       \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
