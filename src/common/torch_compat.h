// The one place where LibTorch version differences (1.13 vs 2.x) are bridged.
#pragma once

#include <torch/version.h>

#define CHEXSCALE_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||            \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10d's collective interface: in 1.13 the Gloo and NCCL groups derive from c10d::ProcessGroup;
// from 2.0 they derive from c10d::Backend (ProcessGroup became a dispatching wrapper). Both have
// the same collective methods (allreduce, broadcast, allgather, barrier) returning c10d::Work.
namespace c10d {
#if CHEXSCALE_TORCH_AT_LEAST(2, 0)
class Backend;
#else
class ProcessGroup;
#endif
}  // namespace c10d

namespace chexscale::compat {

#if CHEXSCALE_TORCH_AT_LEAST(2, 0)
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif

// "1.13.1" style version of the LibTorch we were compiled against.
inline const char* torch_version() {
  return TORCH_VERSION;
}

}  // namespace chexscale::compat
