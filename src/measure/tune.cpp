// The reducer-settings tuner (see tune.h).
#include "measure/tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/enum_parse.h"
#include "common/error.h"
#include "common/timer.h"

namespace chexscale::measure {
namespace {

// Runs one candidate for `steps` timed steps on every rank; the job's images/s.
TuneTrial run_trial(ThroughputJob& job, const TuneOptions& o,
                    const distributed::ReducerOptions& candidate, size_t index, int round,
                    int64_t steps) {
  Stopwatch watch;
  const report::BenchResult r = job.run(candidate, o.warmup_steps, steps);
  TuneTrial t;
  t.round = round;
  t.candidate = index;
  t.steps = steps;
  t.images_per_sec = r.images_per_sec;
  t.pooled_images_per_sec = r.images_per_sec;
  t.seconds = watch.seconds();
  return t;
}

// Images and timed seconds of a candidate's trials so far.
struct Pooled {
  double images = 0, seconds = 0;

  // Adds trial `t` (of `images_in_trial` images) and sets its pooled rate.
  void add(TuneTrial& t, double images_in_trial) {
    images += images_in_trial;
    seconds += images_in_trial / t.images_per_sec;
    t.pooled_images_per_sec = images / seconds;
  }
};

// How many candidates each round of the search runs: n, then ceil(alive / eta) until one is left
// (one round of n when n is 1).
std::vector<size_t> round_sizes(size_t n, int eta) {
  std::vector<size_t> sizes{n};
  while (sizes.back() > 1)
    sizes.push_back((sizes.back() + eta - 1) / eta);
  if (sizes.size() > 1) sizes.pop_back();  // the last round's winner runs no more
  return sizes;
}

// Candidates ordered fastest first by their pooled images/s (ties: grid order), from this round's
// trials.
std::vector<size_t> ranked(const std::vector<TuneTrial>& round_trials) {
  std::vector<size_t> order(round_trials.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return round_trials[a].pooled_images_per_sec > round_trials[b].pooled_images_per_sec;
  });
  std::vector<size_t> candidates;
  for (size_t i : order)
    candidates.push_back(round_trials[i].candidate);
  return candidates;
}

}  // namespace

const char* to_string(AllowedCompression allowed) {
  switch (allowed) {
    case AllowedCompression::kNone:
      return "none";
    case AllowedCompression::kFp16:
      return "fp16";
    case AllowedCompression::kPowerSgd:
      return "powersgd";
  }
  return "?";
}

AllowedCompression parse_allowed_compression(std::string_view text) {
  return parse_enum(
      text, "allow_compression",
      {AllowedCompression::kNone, AllowedCompression::kFp16, AllowedCompression::kPowerSgd});
}

void TuneOptions::validate() const {
  if (bucket_mb_candidates.empty()) {
    throw UsageError("bucket_mb_candidates: give at least one bucket size");
  }
  for (double mb : bucket_mb_candidates) {
    if (!(mb > 0)) throw UsageError(fmt::format("bucket_mb_candidates {} must be > 0", mb));
  }
  if (first_round_steps < 1) {
    throw UsageError(fmt::format("first_round_steps {} must be >= 1", first_round_steps));
  }
  if (warmup_steps < 0) throw UsageError(fmt::format("warmup_steps {} must be >= 0", warmup_steps));
  if (eta < 2) throw UsageError(fmt::format("eta {} must be >= 2", eta));
  for (int r : powersgd_ranks) {
    if (r < 1) throw UsageError(fmt::format("powersgd_ranks: rank {} must be >= 1", r));
  }
  ThroughputOptions w = workload;
  w.steps = first_round_steps;
  w.warmup_steps = warmup_steps;
  w.validate();
}

std::vector<distributed::ReducerOptions> tune_candidates(const TuneOptions& o) {
  std::vector<std::string> compressions{"none"};
  if (o.allow != AllowedCompression::kNone) compressions.emplace_back("fp16");
  if (o.allow == AllowedCompression::kPowerSgd) {
    for (int r : o.powersgd_ranks)
      compressions.push_back(fmt::format("powersgd:{}", r));
  }
  std::vector<distributed::ReducerOptions> out;
  for (bool overlap : {true, false}) {
    if (!overlap && !o.try_no_overlap) continue;
    for (const std::string& compression : compressions) {
      for (double mb : o.bucket_mb_candidates) {
        distributed::ReducerOptions c;
        c.bucket_mb = mb;
        c.overlap = overlap;
        distributed::set_compression(c, compression);
        c.powersgd_start_step = 0;  // a trial is a few steps: compress from the first
        out.push_back(c);
      }
    }
  }
  return out;
}

std::string candidate_name(const distributed::ReducerOptions& c) {
  return fmt::format("bucket {} MiB, {}, {}", c.bucket_mb, distributed::compression_spec(c),
                     c.overlap ? "overlap" : "no overlap");
}

TuneResult run_tune(const std::shared_ptr<distributed::DistContext>& ctx, const TuneOptions& o,
                    const TuneProgress& progress) {
  o.validate();
  if (ctx->world_size() < 2) {
    throw UsageError(
        "tune measures the gradient reducer, which a job of one rank does not use: run it with "
        ">= 2 ranks (e.g. chexscale launch --nproc-per-node 2 -- tune ...)");
  }
  TuneResult result;
  result.candidates = tune_candidates(o);
  result.full_grid = o.full_grid;
  const size_t n = result.candidates.size();
  const std::vector<size_t> sizes = round_sizes(n, o.eta);
  // Round r runs first_round_steps * eta^r steps; the last round's steps are the grid's.
  int64_t last_steps = o.first_round_steps;
  for (size_t r = 1; r < sizes.size(); ++r)
    last_steps *= o.eta;
  const size_t total =
      o.full_grid ? n : std::accumulate(sizes.begin(), sizes.end(), static_cast<size_t>(0));
  Stopwatch watch;
  ThroughputJob job(ctx, o.workload);
  auto record = [&](TuneTrial t) {
    result.trials.push_back(t);
    if (progress) progress(t, result.trials.size(), total);
    return t;
  };
  if (o.full_grid) {
    std::vector<TuneTrial> round;
    for (size_t i = 0; i < n; ++i)
      round.push_back(record(run_trial(job, o, result.candidates[i], i, 0, last_steps)));
    result.best = ranked(round).front();
  } else {
    std::vector<size_t> alive(n);
    std::iota(alive.begin(), alive.end(), 0);
    std::vector<Pooled> pooled(n);
    const double images_per_step =
        static_cast<double>(o.workload.batch_size) * static_cast<double>(ctx->world_size());
    // Round r brings each survivor to first_round_steps * eta^r timed steps in all.
    int64_t steps_so_far = 0, target = o.first_round_steps;
    for (size_t r = 0; r < sizes.size(); ++r, steps_so_far = target, target *= o.eta) {
      std::vector<TuneTrial> round;
      for (size_t i : alive) {
        TuneTrial t =
            run_trial(job, o, result.candidates[i], i, static_cast<int>(r), target - steps_so_far);
        pooled[i].add(t, images_per_step * static_cast<double>(t.steps));
        round.push_back(record(t));
      }
      alive = ranked(round);
      alive.resize(r + 1 < sizes.size() ? sizes[r + 1] : 1);
    }
    result.best = alive.front();
  }
  for (const TuneTrial& t : result.trials) {
    if (t.candidate == result.best) result.best_images_per_sec = t.pooled_images_per_sec;
  }
  result.seconds = watch.seconds();
  return result;
}

std::string tuned_yaml(const TuneResult& r) {
  const distributed::ReducerOptions& best = r.candidates[r.best];
  std::string out = fmt::format(
      "# chexscale tune: {} candidates, {}, {} trials in {:.1f} s\n"
      "# chosen: {} ({:.2f} images/s over its timed steps)\n"
      "# use: chexscale train --config tuned.yaml ...\n",
      r.candidates.size(), r.full_grid ? "full grid" : "successive halving", r.trials.size(),
      r.seconds, candidate_name(best), r.best_images_per_sec);
  out += fmt::format("bucket-mb: {}\ngrad-compression: {}\n", best.bucket_mb,
                     distributed::compression_spec(best));
  if (!best.overlap) out += "no-overlap: true\n";
  out += "#\n# round  steps  images/s  so far  candidate\n";
  for (const TuneTrial& t : r.trials) {
    out +=
        fmt::format("# {:>5}  {:>5}  {:>8.2f}  {:>6.2f}  {}\n", t.round, t.steps, t.images_per_sec,
                    t.pooled_images_per_sec, candidate_name(r.candidates[t.candidate]));
  }
  return out;
}

}  // namespace chexscale::measure
