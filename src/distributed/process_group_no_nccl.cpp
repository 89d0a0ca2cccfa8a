// CPU-only builds: NCCL is not available; asking for it is a usage error with the way out.
#include "common/error.h"
#include "distributed/process_group.h"

namespace chexscale::distributed {

bool nccl_compiled() {
  return false;
}

void require_nccl() {
  throw UsageError(
      "backend nccl needs chexscale built against a CUDA LibTorch; this build is CPU-only (use "
      "`backend` gloo)");
}

c10::intrusive_ptr<compat::CollectiveGroup> make_nccl_group(const c10::intrusive_ptr<c10d::Store>&,
                                                            const RendezvousEnv&,
                                                            std::chrono::milliseconds) {
  require_nccl();
  return {};
}

}  // namespace chexscale::distributed
