// Hand-made profiles for the simulator's tests: numbers chosen so that every expected time can be
// worked out on paper.
#pragma once

#include "simulate/compute_profile.h"
#include "simulate/network_profile.h"

namespace chexscale::simulate::testing {

inline constexpr int64_t kMiB = 1024 * 1024;

// Three 10 MiB gradients, each a (1280, 2048) float matrix; backward 0.2 s produces parameter 2
// at 0.05 s, 1 at 0.1 s, 0 at 0.2 s (reverse registration order, as autograd does). Forward
// 0.1 s, optimizer 0.05 s, batch 8; no PowerSGD rate.
inline ComputeProfile three_layer_profile() {
  ComputeProfile p;
  p.arch = "toy";
  p.image_size = 32;
  p.batch_per_worker = 8;
  p.forward_s = 0.1;
  p.backward_s = 0.2;
  p.optimizer_s = 0.05;
  p.step_s = 0.35;
  const std::vector<int64_t> matrix{1280, 2048};
  p.parameters = {{10 * kMiB, 0.2, matrix}, {10 * kMiB, 0.1, matrix}, {10 * kMiB, 0.05, matrix}};
  return p;
}

// A link without latency on which a 2-rank ring allreduce of 10 MiB takes `seconds`
// (t = 2 (n-1) S / (n B) = S / B for n = 2).
inline NetworkProfile link_for(double seconds_per_10mib, double latency_s = 0) {
  NetworkProfile n;
  n.path = "link";
  n.latency_s = latency_s;
  n.bandwidth_bytes_per_s = 10.0 * kMiB / seconds_per_10mib;
  return n;
}

}  // namespace chexscale::simulate::testing
