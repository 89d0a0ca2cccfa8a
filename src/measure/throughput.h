// The training-throughput benchmark: warm-up steps, then timed steps of the real training step
// (model, loss, bucketed allreduce, Adam) on synthetic tensors or a data set, with each step's
// phases; returns the bench.json result built from every rank's measurements.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "distributed/context.h"
#include "distributed/reducer.h"
#include "report/bench_result.h"
#include "train/precision.h"

namespace chexscale {
class TimelineWriter;
}  // namespace chexscale

namespace chexscale::measure {

struct ThroughputOptions {
  std::string label;
  std::string arch = "densenet121";
  int64_t image_size = 128;                      // network input side
  int64_t batch_size = data::kDefaultBatchSize;  // per worker
  int64_t steps = 20;                            // timed
  int64_t warmup_steps = 3;                      // run first, not timed
  int threads = 1;                               // intra-op threads of this process
  distributed::ReducerOptions reducer;           // buckets, overlap, compression
  std::string data;  // empty: synthetic tensors kept on the device (no I/O)
  int loader_threads = data::kDefaultLoaderThreads;  // decode threads for a data set (synthetic: 1)
  uint64_t seed = 0;
  train::AmpMode amp = train::AmpMode::kOff;  // mixed precision of the forward pass
  bool channels_last = false;                 // NHWC model and batches

  // Throws UsageError naming the field: steps < 1, warmup_steps < 0, batch_size < 1,
  // image_size < 16, threads or loader_threads outside [1, kMaxThreads], or a bad reducer
  // option.
  void validate() const;
};

// Called on every rank after each step: (steps done, warm-up + timed steps, seconds of the step).
using StepProgress = std::function<void(int64_t, int64_t, double)>;

// When given to run_throughput (one worker only): for each timed step, when backward started
// and when each parameter's gradient was ready (now_micros()), recorded by autograd hooks; the
// raw material of a compute profile (bench/compute_profile.h).
struct GradientReadyLog {
  std::vector<int64_t> parameter_bytes;                // per parameter, registration order
  std::vector<std::vector<int64_t>> parameter_shapes;  // per parameter, its sizes
  std::vector<int64_t> backward_start_us;              // per timed step
  std::vector<std::vector<int64_t>> ready_us;          // [timed step][parameter]; 0: no gradient
  std::vector<double> step_seconds;                    // per timed step, its total
};

// The benchmark's model, optimizer and batches, built (and the model broadcast) once; each run()
// builds a reducer of its own settings on them and times its steps. The tuner's trials share one
// job, so a trial costs its steps alone, not a model's construction and a 100 MB broadcast.
// Successive runs continue training the same weights, which does not change a step's time.
class ThroughputJob {
 public:
  // A collective, as is run(). `options.reducer` is only validated here: run() takes its own.
  ThroughputJob(std::shared_ptr<distributed::DistContext> ctx, const ThroughputOptions& options);
  ~ThroughputJob();
  ThroughputJob(const ThroughputJob&) = delete;
  ThroughputJob& operator=(const ThroughputJob&) = delete;

  // `warmup_steps` untimed steps, then `steps` timed ones, with a new reducer of `reducer`'s
  // settings. Records each step's phases on `timeline` when given. Returns the bench.json result
  // (the same on every rank).
  report::BenchResult run(const distributed::ReducerOptions& reducer, int64_t warmup_steps,
                          int64_t steps, TimelineWriter* timeline = nullptr,
                          const StepProgress& progress = {}, GradientReadyLog* ready_log = nullptr);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Runs the benchmark on this rank (a collective: every rank of `ctx` calls it): one
// ThroughputJob, one run of options.reducer. Returns the bench.json result (the same on every
// rank).
report::BenchResult run_throughput(const std::shared_ptr<distributed::DistContext>& ctx,
                                   const ThroughputOptions& options,
                                   TimelineWriter* timeline = nullptr,
                                   const StepProgress& progress = {},
                                   GradientReadyLog* ready_log = nullptr);

}  // namespace chexscale::measure
