// The NCCL process group (GPU collectives), one GPU per local rank. Compiled only against a CUDA
// LibTorch (CHEXSCALE_WITH_CUDA); process_group_no_nccl.cpp stands in on CPU-only builds.
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1  // the header's guard, in case LibTorch's CMake config did not set it
#endif
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

#include <c10/cuda/CUDAFunctions.h>

#include "dist/process_group.h"

namespace chexscale::dist {

bool nccl_compiled() {
  return true;
}

void require_nccl() {}

c10::intrusive_ptr<compat::CollectiveGroup> make_nccl_group(
    const c10::intrusive_ptr<c10d::Store>& store, const RendezvousEnv& env,
    std::chrono::milliseconds timeout) {
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(env.local_rank.value));
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank.value, env.world_size.value,
                                                     options);
}

}  // namespace chexscale::dist
