// `chexscale tune`: measures the reducer's settings on the live job (any launcher, any number of
// ranks) by successive halving and writes tuned.yaml for `train --config`.
#include <fmt/format.h>

#include <filesystem>

#include "cli/command.h"
#include "cli/distributed_flags.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "measure/tune.h"
#include "train/precision.h"

namespace chexscale::cli {
namespace {

struct TuneFlags {
  measure::TuneOptions tune;
  std::string allow = "fp16";
  std::string amp = "off";
  bool overlap_only = false;
  std::string out = "tuned.yaml";
  DistributedFlags dist;
};

int run_tune(TuneFlags f) {
  f.tune.allow = measure::parse_allowed_compression(f.allow);
  f.tune.workload.amp = train::parse_amp_mode(f.amp);
  f.tune.try_no_overlap = !f.overlap_only;
  f.tune.validate();
  auto ctx = distributed::DistContext::init(f.dist.resolved());
  const size_t candidates = measure::tune_candidates(f.tune).size();
  if (ctx->is_main()) {
    const std::string folder = std::filesystem::path(f.out).parent_path().string();
    if (!folder.empty()) make_dirs(folder);
    fmt::print("chexscale tune: {} candidates on {} ranks, {}\n", candidates, ctx->world_size(),
               f.tune.full_grid ? "full grid" : "successive halving");
  }
  const measure::TuneResult r =
      measure::run_tune(ctx, f.tune, [&](const measure::TuneTrial& t, size_t done, size_t total) {
        if (!ctx->is_main()) return;
        fmt::print("  [{}/{}] round {} {:>3} steps {:>9.2f} images/s ({:.2f} so far)  {}\n", done,
                   total, t.round, t.steps, t.images_per_sec, t.pooled_images_per_sec,
                   measure::candidate_name(measure::tune_candidates(f.tune)[t.candidate]));
        std::fflush(stdout);
      });
  if (!ctx->is_main()) return 0;
  write_file_atomic(f.out, measure::tuned_yaml(r));
  fmt::print("chose {} ({:.2f} images/s) after {} trials in {:.1f} s; wrote {}\n",
             measure::candidate_name(r.candidates[r.best]), r.best_images_per_sec, r.trials.size(),
             r.seconds, f.out);
  return 0;
}

}  // namespace

void add_tune_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "tune",
      "Choose the gradient reducer's settings for the network this job runs on: every\n"
      "combination of bucket size, compression (bounded by --allow-compression) and overlap runs\n"
      "a few steps of the real training step; successive halving keeps the fastest 1/ETA (3)\n"
      "and runs them to ETA times the steps until one is left. Writes tuned.yaml for\n"
      "`train --config`. Run it as the job itself (>= 2 ranks), e.g.\n"
      "  chexscale launch --nproc-per-node 2 -- tune --arch densenet121 --out tuned.yaml");
  auto f = std::make_shared<TuneFlags>();
  auto& w = f->tune.workload;
  cmd->add_option("--arch", w.arch, "Network: densenet121, resnet50, ... ('chexscale models')")
      ->capture_default_str();
  cmd->add_option("--image-size", w.image_size, "Network input side in pixels")
      ->capture_default_str();
  cmd->add_option("--batch-size", w.batch_size, "Examples per worker per step")
      ->capture_default_str();
  cmd->add_option("--threads", w.threads, "Intra-op (OpenMP) threads per worker")
      ->capture_default_str();
  cmd->add_option("--data", w.data, "Data set folder; empty = synthetic tensors")->type_name("DIR");
  cmd->add_option("--seed", w.seed, "Seed of weights and synthetic data")->capture_default_str();
  cmd->add_option("--amp", f->amp, "Mixed precision: off, bf16 or fp16")->capture_default_str();
  cmd->add_flag("--channels-last", w.channels_last, "Channels-last (NHWC) layout");
  cmd->add_option("--bucket-mb-candidates", f->tune.bucket_mb_candidates,
                  "Bucket sizes to try (MiB)")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--allow-compression", f->allow,
                  "What the tuner may choose: none, fp16 (none or fp16) or powersgd (also "
                  "PowerSGD at --powersgd-ranks)")
      ->capture_default_str();
  cmd->add_option("--powersgd-ranks", f->tune.powersgd_ranks, "PowerSGD ranks to try")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_flag("--overlap-only", f->overlap_only, "Do not try overlap off");
  cmd->add_option("--first-round-steps", f->tune.first_round_steps,
                  "Timed steps per candidate in the first round; each later round brings its "
                  "candidates to ETA times the last round's total")
      ->capture_default_str();
  cmd->add_option("--eta", f->tune.eta,
                  "Each round keeps the fastest 1/ETA of its candidates (rounded up), ranked "
                  "over all their timed steps so far")
      ->capture_default_str();
  cmd->add_option("--warmup-steps", f->tune.warmup_steps, "Untimed steps per trial")
      ->capture_default_str();
  cmd->add_flag("--full-grid", f->tune.full_grid,
                "Measure every candidate with the last round's steps instead (the reference "
                "the search is checked against)");
  cmd->add_option("--out", f->out, "Where rank 0 writes tuned.yaml")->capture_default_str();
  add_distributed_flags(*cmd, f->dist);
  registry.add(cmd, [f](const RunContext&) { return run_tune(*f); });
}

}  // namespace chexscale::cli
