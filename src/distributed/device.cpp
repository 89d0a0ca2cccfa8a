// Device selection (see device.h).
#include "distributed/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <fmt/format.h>
#include <torch/cuda.h>

#include "common/error.h"
#include "distributed/process_group.h"

namespace chexscale::distributed {

torch::Device resolve_device(DeviceRequest requested, int local_rank, int local_world_size) {
  if (requested == DeviceRequest::kCpu) return torch::Device(torch::kCPU);
  const bool cuda = torch::cuda::is_available();
  const int gpus = cuda ? static_cast<int>(torch::cuda::device_count()) : 0;
  if (requested == DeviceRequest::kAuto) {
    return cuda && gpus >= local_world_size && local_rank < gpus
               ? torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank))
               : torch::Device(torch::kCPU);
  }
  if (!nccl_compiled()) {
    throw UsageError(
        "device cuda needs chexscale built against a CUDA LibTorch (Torch_DIR, see docs/gpu.md); "
        "this build is CPU-only");
  }
  if (!cuda) {
    throw UsageError(
        "device cuda: no CUDA device is visible (check nvidia-smi, the driver and "
        "CUDA_VISIBLE_DEVICES), or use `device` cpu");
  }
  if (local_rank >= gpus) {
    throw UsageError(fmt::format(
        "device cuda: local rank {} needs cuda:{} but {} GPU(s) are visible; run at most {} "
        "rank(s) per node",
        local_rank, local_rank, gpus, gpus));
  }
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
}

void make_current_device(const torch::Device& device) {
  if (!device.is_cuda()) return;
  c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
  at::globalContext().setBenchmarkCuDNN(true);
}

}  // namespace chexscale::distributed
