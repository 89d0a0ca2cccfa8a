// Which device a rank computes on (DeviceRequest auto|cpu|cuda): one GPU per local rank,
// cuda:LOCAL_RANK.
#pragma once

#include <torch/torch.h>

#include "distributed/dist_options.h"

namespace chexscale::distributed {

// cpu -> cpu; cuda -> cuda:local_rank, a UsageError saying why when this build or host cannot
// (CPU-only LibTorch, no visible GPU, fewer GPUs than local ranks); auto -> cuda:local_rank
// when the host has a GPU for every local rank, else cpu.
torch::Device resolve_device(DeviceRequest requested, int local_rank, int local_world_size);

// Makes `device` the calling thread's current CUDA device (torch.cuda.set_device), so that
// libraries creating CUDA state (cuDNN, NCCL) use this rank's GPU, and turns on cuDNN's
// autotuner (torch.backends.cudnn.benchmark = True, as torchvision's reference training does:
// the fixed input size gets the fastest convolution algorithms from the first steps on).
// Nothing for a CPU device.
void make_current_device(const torch::Device& device);

}  // namespace chexscale::distributed
