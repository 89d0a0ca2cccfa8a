// A working buffer kept from call to call: a fresh large tensor per collective would fault its
// pages in every time (the allocator hands large blocks back to the system when they are freed),
// a few ms per MB on a VM. Not thread-safe: one per thread that uses it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace chexscale::distributed {

class KeptBuffer {
 public:
  // `elements` of `type`, in the kept buffer (made anew only when it is too small or of
  // another type); its contents are whatever the last user left.
  at::Tensor get(c10::ScalarType type, int64_t elements) {
    if (!buffer_.defined() || buffer_.scalar_type() != type || buffer_.numel() < elements)
      buffer_ = at::empty({elements}, at::TensorOptions().dtype(type));
    return buffer_.narrow(0, 0, elements);
  }

 private:
  at::Tensor buffer_;
};

}  // namespace chexscale::distributed
