// The step simulator: one data-parallel training step replayed as the engine runs it. Gradients
// become ready during backward at the profiled times, fill buckets in the reducer's plan, and
// each bucket's allreduce queues on the communication channel in launch order as soon as its
// last gradient is ready (or after backward without overlap); communication CPU competes with
// the compute threads where the worker has no spare CPU (its threads' cores or its CPU quota);
// PowerSGD's two allreduces per bucket and its arithmetic run in the reducer's order on the
// backward thread; each step waits for the slowest worker (stragglers drawn from the profile's
// step spread); exposed communication is what finishes after backward. Model and limits:
// docs/simulate.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/step_times.h"
#include "distributed/reducer_defaults.h"
#include "simulate/collective_cost.h"
#include "simulate/compute_profile.h"

namespace chexscale::simulate {

struct SimulationSettings {
  double bucket_mb = distributed::kDefaultBucketMb;  // the reducer's defaults
  double first_bucket_mb = distributed::kDefaultFirstBucketMb;
  bool overlap = true;
  // none | fp16 | bf16 | powersgd[:RANK], as the reducer's --grad-compression reads it.
  std::string compression = "none";
  double powersgd_min_rate = distributed::kDefaultPowerSgdMinRate;
  Algorithm algorithm = Algorithm::kRing;
  // The CPU each worker has, in cores (0.15: a quota of 0.15 core); 0: the profile's CPU quota
  // where it has one, else its threads (no spare core for communication).
  double cores_per_worker = 0;
  bool stragglers = true;  // each step waits for the slowest of n draws from step_spread
  int steps = 100;
  uint64_t seed = 1;

  // UsageError naming the field for sizes <= 0, steps < 1, cores < 0, an unknown compression or
  // a negative PowerSGD minimum rate.
  void validate() const;
};

struct SimulatedJob {
  Topology topology;
  StepTimes step;  // mean seconds per step of each phase, and the mean total
  double images_per_sec = 0;
  size_t buckets = 0;
  size_t allreduces_per_step = 0;    // PowerSGD makes two of each bucket that it compresses
  int64_t wire_bytes_per_step = 0;   // payload of all buckets' allreduces, per rank
  double comm_seconds_per_step = 0;  // the channel's busy time
  double comm_cpu_seconds_per_step = 0;
  double compression_seconds_per_step = 0;  // PowerSGD's arithmetic on the backward thread
};

// Simulates `settings.steps` steps of the job; deterministic for a seed. UsageError for PowerSGD
// with a profile that lacks the parameters' shapes or PowerSGD's rate.
SimulatedJob simulate_job(const ComputeProfile& compute, const Links& links,
                          const Topology& topology, const SimulationSettings& settings);

}  // namespace chexscale::simulate
