// `chexscale bench`: training throughput (images/s, step time spread, per-step breakdown) of the
// real training step on synthetic tensors or a data set, for the current job or, with --workers,
// a sweep of worker counts through the local launcher with scaling efficiency.
#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/distributed_flags.h"
#include "cli/option_args.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/timeline.h"
#include "measure/bench_document.h"
#include "measure/profile_run.h"
#include "measure/sweep.h"
#include "measure/throughput.h"

namespace chexscale::cli {
namespace {

struct BenchFlags {
  measure::ThroughputOptions run;
  std::string out = "runs/bench";
  std::string json_file;
  std::string timeline;
  std::string profile;
  std::string workers;
  std::string amp = "off";
  DistributedFlags dist;
  ReducerFlags reducer;
};

double percent(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

void print_run(const report::BenchResult& r) {
  const StepTimes& b = r.breakdown;
  const report::TimeSummary& s = r.step_time_s;
  fmt::print(
      "\nchexscale bench{}: {} {}x{}, batch {}/worker, {} worker(s) ({}, {} node(s)), {} "
      "thread(s)/worker, data {}, overlap {}, buckets {} MiB, compression {}, device {}, amp "
      "{}{}\n",
      r.label.empty() ? "" : " [" + r.label + "]", r.arch, r.image_size, r.image_size,
      r.batch_per_worker, r.world_size, r.backend, r.nnodes, r.threads_per_worker, r.data,
      r.overlap ? "on" : "off", r.bucket_mb, r.compression, r.device, r.amp,
      r.channels_last ? ", channels-last" : "");
  fmt::print(
      "  images/s      {:9.2f} total {:9.2f} per worker   ({} timed steps after {} warm-up)\n",
      r.images_per_sec, r.images_per_sec_per_worker, r.steps, r.warmup_steps);
  fmt::print("  step time     median {:.3f} s   p10 {:.3f}   p90 {:.3f}   mean {:.3f}\n", s.median,
             s.p10, s.p90, s.mean);
  fmt::print("  breakdown (median step, mean over ranks)\n");
  for (const StepPhase& p : kStepPhases) {
    const double v = b.*p.seconds;
    fmt::print("    {:<13} {:8.3f} s {:6.1f} %\n", p.label, v, percent(v, b.total));
  }
  fmt::print("    {:<13} {:8.3f} s\n", "total", b.total);
}

void print_sweep(const measure::SweepResult& sweep) {
  fmt::print("\nchexscale bench sweep{}\n", sweep.label.empty() ? "" : " [" + sweep.label + "]");
  fmt::print("  {:>7} {:>10} {:>11} {:>16} {:>13} {:>11}\n", "workers", "images/s", "per worker",
             "step median (s)", "exposed comm", "efficiency");
  for (size_t i = 0; i < sweep.runs.size(); ++i) {
    const report::BenchResult& r = sweep.runs[i];
    const measure::ScalingPoint& p = sweep.scaling[i];
    fmt::print("  {:>7} {:>10.2f} {:>11.2f} {:>16.3f} {:>11.1f} % {:>11.3f}\n", p.workers,
               p.images_per_sec, r.images_per_sec_per_worker, r.step_time_s.median,
               percent(r.breakdown.comm_exposed, r.breakdown.total), p.efficiency);
  }
}

// The options only the sweep reads: each run gets its own label, output and timeline from it.
const std::set<std::string> kSweepOnlyOptions = {"workers", "label",    "out",
                                                 "json",    "timeline", "profile"};

// `cmd` holds the options as given: each run of the sweep gets them again.
int run_sweep(const BenchFlags& f, const CLI::App& cmd) {
  // Each run of the sweep would refuse the same bad value: refuse it once, before the first.
  measure::ThroughputOptions run = f.run;
  run.reducer = f.reducer.resolved();
  run.amp = train::parse_amp_mode(f.amp);
  run.validate();
  f.dist.resolved();
  measure::SweepOptions s;
  s.executable = "/proc/self/exe";
  s.workers = measure::parse_worker_counts(f.workers);
  s.bench_args = {"--workers", ""};  // each run measures its own job: no sweep inside a sweep
  const std::vector<std::string> given = given_options_as_args(cmd, kSweepOnlyOptions);
  s.bench_args.insert(s.bench_args.end(), given.begin(), given.end());
  s.out_dir = f.out;
  s.label = f.run.label;
  s.timeline = f.timeline;
  print_sweep(measure::run_sweep(s));
  fmt::print("  wrote {}/sweep.json and bench-w<N>.json\n", f.out);
  return 0;
}

int run_job(BenchFlags f) {
  f.run.reducer = f.reducer.resolved();
  f.run.amp = train::parse_amp_mode(f.amp);
  auto ctx = distributed::DistContext::init(f.dist.resolved());
  if (!f.profile.empty() && ctx->world_size() != 1) {
    throw UsageError(
        fmt::format("--profile measures one worker; this job has {} (run it alone, "
                    "without a launcher)",
                    ctx->world_size()));
  }
  const std::string path = f.json_file.empty() ? f.out + "/bench.json" : f.json_file;
  if (ctx->is_main()) {  // an unwritable --out or --json fails before the measurement
    const std::string folder = std::filesystem::path(path).parent_path().string();
    if (!folder.empty()) make_dirs(folder);
  }
  std::unique_ptr<TimelineWriter> timeline;
  if (!f.timeline.empty()) {
    timeline = std::make_unique<TimelineWriter>(timeline_path_for_rank(f.timeline, ctx->rank()),
                                                TimelineOptions{ctx->rank()});
  }
  std::unique_ptr<ProgressReporter> progress;
  if (ctx->is_main()) {
    progress =
        std::make_unique<ProgressReporter>("bench", f.run.warmup_steps + f.run.steps, "steps");
  }
  measure::GradientReadyLog ready_log;
  const report::BenchResult result = measure::run_throughput(
      ctx, f.run, timeline.get(),
      [&](int64_t done, int64_t total, double step_s) {
        if (progress) {
          progress->update(done, fmt::format("step {:.3f} s{}", step_s,
                                             done <= f.run.warmup_steps ? " (warm-up)" : ""));
        }
      },
      f.profile.empty() ? nullptr : &ready_log);
  if (progress) progress->finish();
  if (timeline) {
    timeline.reset();  // the final flush
    ctx->barrier();
    if (ctx->is_main()) merge_rank_timelines(f.timeline, ctx->world_size());
  }
  if (!ctx->is_main()) return 0;
  print_run(result);
  write_file_atomic(path, report::to_json(result).dump(2) + "\n");
  if (!f.profile.empty()) {
    simulate::save_compute_profile(measure::make_compute_profile(result, ready_log), f.profile);
  }
  fmt::print("  wrote {}{}{}\n", path, f.timeline.empty() ? "" : " and " + f.timeline,
             f.profile.empty() ? "" : " and the compute profile " + f.profile);
  return 0;
}

}  // namespace

void add_bench_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Training throughput: images/s, step time and where it goes (data wait, forward, backward,\n"
      "exposed communication, optimizer). One job (run several ranks under 'chexscale launch',\n"
      "mpirun or srun), or --workers 1,2,4 to sweep worker counts with scaling efficiency.");
  auto f = std::make_shared<BenchFlags>();
  auto& r = f->run;
  cmd->add_option("--arch", r.arch, "Network: densenet121, resnet50, ... ('chexscale models')")
      ->capture_default_str();
  cmd->add_option("--image-size", r.image_size, "Network input side in pixels")
      ->capture_default_str();
  cmd->add_option("--batch-size", r.batch_size, "Examples per worker per step")
      ->capture_default_str();
  cmd->add_option("--steps", r.steps, "Timed steps")->capture_default_str();
  cmd->add_option("--warmup-steps", r.warmup_steps, "Steps run first and excluded from timing")
      ->capture_default_str();
  cmd->add_option("--threads", r.threads, "Intra-op (OpenMP) threads per worker")
      ->capture_default_str();
  cmd->add_option("--data", r.data,
                  "ChestX-ray14 folder or shard folder to read; empty = synthetic tensors (no I/O)")
      ->type_name("DIR");
  cmd->add_option("--loader-threads", r.loader_threads, "Decode threads per worker with --data")
      ->capture_default_str();
  cmd->add_option("--seed", r.seed, "Seed of weights and synthetic data")->capture_default_str();
  cmd->add_option("--label", r.label, "Name of this result set (e.g. bare-metal, kubernetes)")
      ->capture_default_str();
  cmd->add_option("--out", f->out, "Folder for bench.json (sweep: bench-w<N>.json, sweep.json)")
      ->capture_default_str();
  cmd->add_option("--json", f->json_file, "Write this run's bench.json here instead of OUT")
      ->type_name("FILE");
  cmd->add_option("--timeline", f->timeline,
                  "Chrome trace of every rank's step phases and bucket allreduces (rank r>0 "
                  "writes FILE.rank<r>.json; rank 0 merges those it can see at the end)")
      ->type_name("FILE");
  cmd->add_option("--profile", f->profile,
                  "Also write the compute profile of this one-worker run for `chexscale "
                  "simulate`: median phases, step spread, when each gradient is ready")
      ->type_name("FILE");
  cmd->add_option("--workers", f->workers,
                  "Sweep these worker counts (e.g. 1,2,4), each a job of the local launcher; "
                  "empty = measure the current job")
      ->type_name("LIST");
  cmd->add_option("--amp", f->amp,
                  "Mixed precision of the forward pass: off, bf16 (CPU or GPU) or fp16 (GPU, with "
                  "dynamic loss scaling)")
      ->capture_default_str();
  cmd->add_flag("--channels-last", r.channels_last,
                "Channels-last (NHWC) layout of the model and batches");
  add_reducer_flags(*cmd, f->reducer);
  add_distributed_flags(*cmd, f->dist);
  registry.add(cmd, [f](const RunContext& ctx) {
    if (!f->workers.empty() && !f->profile.empty()) {
      throw UsageError("--profile measures one worker: give it without --workers");
    }
    return f->workers.empty() ? run_job(*f) : run_sweep(*f, ctx.cmd);
  });
}

}  // namespace chexscale::cli
