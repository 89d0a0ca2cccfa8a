// The NCCL process group (GPU collectives), one GPU per local rank. Compiled only against a CUDA
// LibTorch (CHEXSCALE_WITH_CUDA); process_group_no_nccl.cpp stands in on CPU-only builds.
// cmake/Dependencies.cmake defines USE_C10D_NCCL (the header's guard) and adds nccl.h's folder.
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include "distributed/process_group.h"

namespace chexscale::distributed {

bool nccl_compiled() {
  return true;
}

void require_nccl() {}

c10::intrusive_ptr<compat::CollectiveGroup> make_nccl_group(
    const c10::intrusive_ptr<c10d::Store>& store, const RendezvousEnv& env,
    std::chrono::milliseconds timeout) {
  // DistContext::init has made cuda:LOCAL_RANK this process's current device: NCCL binds its
  // communicator to the device of the first tensors it sees, which are on that GPU.
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank.value, env.world_size.value,
                                                     options);
}

}  // namespace chexscale::distributed
