// Large CPU buffers on transparent huge pages: 2 MiB-aligned and madvise(MADV_HUGEPAGE)d, as numpy
// allocates its large arrays. A collective streams its whole buffer through shared memory or a
// socket, and on 4 KiB pages a 64 MiB buffer costs 16384 TLB entries: OpenMPI's shared-memory
// allreduce of 64 MiB takes 30 ms from a LibTorch tensor and 22 ms from the same bytes on huge
// pages (docs/perf.md). Used for the gradient reducer's bucket buffers and commbench's.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace chexscale {

inline constexpr int64_t kHugePageBytes = 2 << 20;

// A 1-D tensor of `numel` zeros of `options` (dtype, device). CPU buffers of at least one huge
// page are allocated on huge pages (where the kernel grants them: THP "always" or "madvise");
// smaller ones and other devices are plain torch::zeros.
torch::Tensor zeros_on_huge_pages(int64_t numel, const torch::TensorOptions& options);

}  // namespace chexscale
