// Averaging of per-rank metrics (loss, accuracy, example counts) across the job: one small
// allreduce of float64 values. BatchNorm running statistics are NOT averaged: each rank keeps its
// own, as in the reference (Horovod) and PyTorch DDP; rank 0's are the ones checkpointed.
#pragma once

#include <vector>

#include "distributed/context.h"

namespace chexscale::distributed {

// The mean over ranks of each value (every rank gets the same result); identity on one rank.
std::vector<double> average_across_ranks(DistContext& ctx, const std::vector<double>& values);
double average_across_ranks(DistContext& ctx, double value);

}  // namespace chexscale::distributed
