// The one place where LibTorch version differences (1.13 vs 2.x) are bridged.
#pragma once

#include <torch/version.h>

#define CHEXSCALE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||            \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace chexscale::compat {

// "1.13.1" style version of the LibTorch we were compiled against.
inline const char* torch_version() { return TORCH_VERSION; }

}  // namespace chexscale::compat
