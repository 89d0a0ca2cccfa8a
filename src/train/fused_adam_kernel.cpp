// adam_update_float (see fused_adam_kernel.h): one pass, vectorised by the compiler.
#include "train/fused_adam_kernel.h"

#include <cmath>

namespace chexscale::train {

namespace {

template <bool kWeightDecay>
void update(float* __restrict p, const float* __restrict g, float* __restrict m,
            float* __restrict v, int64_t n, const AdamScalars& s) {
  // Locals, so that the stores through p, m and v cannot be taken to alias the scalars.
  const float beta1 = s.beta1, one_minus_beta1 = s.one_minus_beta1;
  const float beta2 = s.beta2, one_minus_beta2 = s.one_minus_beta2;
  const float sqrt_bias2 = s.sqrt_bias2, eps = s.eps, neg_step_size = s.neg_step_size;
  const float weight_decay = s.weight_decay;
  for (int64_t i = 0; i < n; ++i) {
    const float grad = kWeightDecay ? g[i] + weight_decay * p[i] : g[i];
    const float mi = m[i] * beta1 + one_minus_beta1 * grad;
    const float vi = v[i] * beta2 + one_minus_beta2 * grad * grad;
    m[i] = mi;
    v[i] = vi;
    p[i] += neg_step_size * (mi / (std::sqrt(vi) / sqrt_bias2 + eps));
  }
}

}  // namespace

void adam_update_float(float* p, const float* g, float* m, float* v, int64_t n,
                       const AdamScalars& s) {
  if (s.weight_decay != 0.0f) {
    update<true>(p, g, m, v, n, s);
  } else {
    update<false>(p, g, m, v, n, s);
  }
}

}  // namespace chexscale::train
