// The fused Adam update over a float32 range (FusedAdam's inner loop), kept apart from LibTorch
// so that it alone is compiled for vectorisation (-O3 -fno-math-errno; see CMakeLists.txt).
#pragma once

#include <cstdint>

namespace chexscale::train {

struct AdamScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2;
  float sqrt_bias2;  // sqrt(1 - beta2^t)
  float eps;
  float neg_step_size;  // -lr / (1 - beta1^t)
  float weight_decay;
};

// Elements [0, n) of parameter p, gradient g and moments m, v (non-overlapping arrays):
//   g' = g + wd * p;  m = b1 * m + (1 - b1) * g';  v = b2 * v + (1 - b2) * g'^2
//   p += -step_size * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
void adam_update_float(float* p, const float* g, float* m, float* v, int64_t n,
                       const AdamScalars& s);

}  // namespace chexscale::train
