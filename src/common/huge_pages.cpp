// zeros_on_huge_pages(): aligned_alloc + madvise, owned by the tensor's storage (huge_pages.h).
#include "common/huge_pages.h"

#include <sys/mman.h>

#include <cstdlib>
#include <new>

namespace chexscale {

torch::Tensor zeros_on_huge_pages(int64_t numel, const torch::TensorOptions& options) {
  const int64_t bytes = numel * static_cast<int64_t>(options.dtype().itemsize());
  if (!options.device().is_cpu() || bytes < kHugePageBytes) return torch::zeros({numel}, options);
  const int64_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* memory = std::aligned_alloc(kHugePageBytes, static_cast<size_t>(rounded));
  if (memory == nullptr) throw std::bad_alloc();
  // Advice only: where the kernel has no huge pages the buffer is on small pages, as before.
  ::madvise(memory, static_cast<size_t>(rounded), MADV_HUGEPAGE);
  torch::Tensor t = torch::from_blob(
      memory, {numel}, [](void* p) { std::free(p); }, options.requires_grad(false));
  t.zero_();
  return t;
}

}  // namespace chexscale
