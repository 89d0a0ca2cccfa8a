// Which gradients travel together: parameters in reverse registration order (roughly the order
// backward produces their gradients), cut into buckets of at most cap bytes, the first bucket
// smaller so that communication starts early; a parameter larger than the cap gets its own.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace chexscale::distributed {

// Indices into `parameters`, one list per bucket, in launch order. A bucket never mixes dtypes
// or devices.
std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& parameters,
                                              int64_t first_bucket_bytes, int64_t bucket_bytes);

// The same plan from sizes alone: bytes[i] of parameter i, and kind[i] equal for parameters
// that may share a bucket (same dtype and device). The simulator replans from a profile with it.
std::vector<std::vector<size_t>> plan_buckets_by_size(const std::vector<int64_t>& bytes,
                                                      const std::vector<int>& kind,
                                                      int64_t first_bucket_bytes,
                                                      int64_t bucket_bytes);

}  // namespace chexscale::distributed
