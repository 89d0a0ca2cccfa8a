// What PowerSGD (distributed/powersgd.h) costs one gradient bucket, from its parameters' shapes:
// the elements of its two allreduces (P with the uncompressed gradients, then Q) and the
// floating-point work of each of its three calls, counted the way the engine computes them.
// The simulator turns the work into seconds with the rate `bench --profile` measured.
#pragma once

#include <cstdint>
#include <vector>

#include "distributed/powersgd.h"

namespace chexscale::simulate {

struct PowerSgdBucketCost {
  bool compressed = false;  // a matrix of the bucket is compressed (else: one plain allreduce)
  int64_t uncompressed_elements = 0;  // of the gradients sent as they are (copied into the bucket)
  int64_t first_elements = 0;         // uncompressed gradients + sum of rows * rank (the P payload)
  int64_t second_elements = 0;        // sum of cols * rank (the Q payload)
  // Floating-point operations of each call (powersgd.h): first_payload() adds the residual and
  // computes P = M Q; second_payload() orthogonalises P and computes Q = M^T P; finish() computes
  // M' = P Q^T and the residual and orthogonalises Q.
  double first_flops = 0;
  double second_flops = 0;
  double finish_flops = 0;
  double flops() const { return first_flops + second_flops + finish_flops; }
};

// The cost of a bucket of gradients of `shapes` at `options` (the engine's own rule of which
// matrices it compresses and at which rank: distributed::powersgd_matrix_rank).
PowerSgdBucketCost powersgd_bucket_cost(const std::vector<std::vector<int64_t>>& shapes,
                                        const distributed::PowerSgdOptions& options);

}  // namespace chexscale::simulate
