// `bench --profile`: turns a one-worker throughput run and its gradient-ready log into the
// compute profile the simulator reads (simulate/compute_profile.h).
#pragma once

#include "measure/throughput.h"
#include "report/bench_result.h"
#include "simulate/compute_profile.h"

namespace chexscale::measure {

// The median phases of `result`, the step spread (each timed step over their median), per
// parameter its shape and the median time after backward's start at which its gradient was
// ready, and PowerSGD's arithmetic rate and the gradient passes measured on those shapes (CPU
// workers only: 0 on another device). Throws Error when the log and the result disagree (steps, or
// a world size other than 1).
simulate::ComputeProfile make_compute_profile(const report::BenchResult& result,
                                              const GradientReadyLog& log);

// Floating-point operations per second of PowerSGD's three calls (simulate/powersgd_cost.h) on
// gradients of these shapes in the reducer's default buckets at the default rank, on this
// thread's intra-op threads: the median of a few steps of the engine's own PowerSgdBucket.
double measure_powersgd_flops_per_s(const std::vector<std::vector<int64_t>>& shapes);

// The reducer's passes over gradients of these shapes (simulate::GradientPasses) on this
// thread's intra-op threads: float32 gradients as slots of flat buckets in the reducer's default
// plan, each pass timed over all of them; the median of a few repetitions after one untimed.
simulate::GradientPasses measure_gradient_passes(const std::vector<std::vector<int64_t>>& shapes);

}  // namespace chexscale::measure
