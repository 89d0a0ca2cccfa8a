// `bench --profile`: turns a one-worker throughput run and its gradient-ready log into the
// compute profile the simulator reads (simulate/compute_profile.h).
#pragma once

#include "bench/throughput.h"
#include "report/bench_result.h"
#include "simulate/compute_profile.h"

namespace chexscale::bench {

// The median phases of `result`, the step spread (each timed step over their median) and, per
// parameter, the median time after backward's start at which its gradient was ready. Throws
// Error when the log and the result disagree (steps, or a world size other than 1).
simulate::ComputeProfile make_compute_profile(const report::BenchResult& result,
                                              const GradientReadyLog& log);

}  // namespace chexscale::bench
