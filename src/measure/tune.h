// `chexscale tune`: chooses the reducer's settings (bucket size, gradient compression, overlap)
// for the network a job runs on, by measuring them on the live job. Every candidate of the grid
// runs a few steps of the real training step; successive halving keeps the fastest 1/eta and
// multiplies the steps by eta until one is left (a survivor runs only the steps it lacks: its
// earlier rounds' steps count towards its measurement) (Jamieson & Talwalkar 2016, with Hyperband's
// eta = 3; Horovod's autotune is the anchor, with a Bayesian search over fusion buffer and cycle
// time). Every trial runs on one ThroughputJob: the model is built and broadcast once. Decisions
// use the job's images/s (the slowest rank's time), so every rank keeps the same candidates.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "distributed/context.h"
#include "measure/throughput.h"

namespace chexscale::measure {

// What compression the tuner may choose: accuracy is the user's call.
enum class AllowedCompression { kNone, kFp16, kPowerSgd };

const char* to_string(AllowedCompression allowed);                    // "none", "fp16", "powersgd"
AllowedCompression parse_allowed_compression(std::string_view text);  // UsageError otherwise

struct TuneOptions {
  ThroughputOptions workload;  // arch, image size, batch, threads, data; its reducer is ignored
  std::vector<double> bucket_mb_candidates{2, 8, 25, 64};
  AllowedCompression allow = AllowedCompression::kFp16;  // none: only none; fp16: none, fp16;
                                                         // powersgd: also powersgd ranks 1, 4
  std::vector<int> powersgd_ranks{1, 4};
  bool try_no_overlap = true;     // also each setting with overlap off
  int64_t first_round_steps = 2;  // timed steps per candidate in round 0, times eta each round
  int eta = 3;               // each round keeps the fastest 1/eta (rounded up) of its candidates
  int64_t warmup_steps = 1;  // per candidate per round (a new reducer's first step is slow)
  bool full_grid = false;    // instead: every candidate with the last round's steps (the reference)

  // UsageError naming the field: no bucket size candidates or one <= 0, steps < 1, warmup < 0,
  // eta < 2, a PowerSGD rank < 1.
  void validate() const;
};

// The grid the tuner searches, in a fixed order (the same on every rank).
std::vector<distributed::ReducerOptions> tune_candidates(const TuneOptions& options);

// A short name of a candidate: "bucket 25 MiB, fp16, overlap".
std::string candidate_name(const distributed::ReducerOptions& candidate);

struct TuneTrial {
  int round = 0;
  size_t candidate = 0;  // index into TuneResult::candidates
  int64_t steps = 0;     // timed steps of this trial
  double images_per_sec = 0;
  // Over every timed step of this candidate so far (this trial and its earlier rounds'): what
  // the search ranks by.
  double pooled_images_per_sec = 0;
  double seconds = 0;  // wall time of the trial, warm-up included
};

struct TuneResult {
  std::vector<distributed::ReducerOptions> candidates;
  std::vector<TuneTrial> trials;   // in the order run
  size_t best = 0;                 // the chosen candidate
  double best_images_per_sec = 0;  // over all its timed steps
  double seconds = 0;              // the whole search
  bool full_grid = false;
};

// Called on every rank after each trial.
using TuneProgress = std::function<void(const TuneTrial&, size_t trials_done, size_t trials_total)>;

// Runs the search on this rank (a collective: every rank calls it with the same options).
TuneResult run_tune(const std::shared_ptr<distributed::DistContext>& ctx,
                    const TuneOptions& options, const TuneProgress& progress = {});

// tuned.yaml for `train --config` / `bench --config`: the chosen settings as top-level keys, and
// the table of trials as comments.
std::string tuned_yaml(const TuneResult& result);

}  // namespace chexscale::measure
