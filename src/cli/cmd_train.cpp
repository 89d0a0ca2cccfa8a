// `chexscale train`: CheXNet training with the published recipe on one worker or many (run each
// rank through `chexscale launch`, mpirun, Slurm or Kubernetes); progress on rank 0.
#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <sstream>

#include "cli/command.h"
#include "cli/dataset_flags.h"
#include "cli/distributed_flags.h"
#include "cli/stop_signals.h"
#include "common/atomic_file.h"
#include "common/progress.h"
#include "common/timeline.h"
#include "data/batch.h"
#include "distributed/elastic_round.h"
#include "distributed/env.h"
#include "train/trainer.h"

namespace chexscale::cli {
namespace {

// Flags whose values need converting after parsing (names -> enums).
struct TrainFlags {
  train::TrainerOptions trainer;
  DatasetFlags dataset;
  DistributedFlags dist;
  ReducerFlags reducer;
  std::string optimizer = train::to_string(train::OptimizerOptions{}.kind);
  std::string on_nan = train::to_string(train::TrainerOptions{}.non_finite);
  std::string amp = train::to_string(train::TrainerOptions{}.amp);
  std::string resume;
  bool no_augment = false;

  // The trainer's options with the converted flags filled in, validated.
  train::TrainerOptions resolved() const;
};

train::TrainerOptions TrainFlags::resolved() const {
  train::TrainerOptions o = trainer;
  o.data.augment = !no_augment;
  o.data.dataset = dataset.resolved();
  o.data.seed = o.seed;
  o.optimizer.kind = train::parse_optimizer_kind(optimizer);
  o.non_finite = train::parse_non_finite_policy(on_nan);
  o.amp = train::parse_amp_mode(amp);
  o.resume = train::parse_resume(resume);
  o.reducer = reducer.resolved();
  o.validate();
  return o;
}

std::string value_or_na(const std::optional<double>& v) {
  return v ? fmt::format("{:.4f}", *v) : "n/a";
}

// Draws the progress bar (terminal) or periodic lines, and one line per epoch.
class ProgressPrinter : public train::TrainerObserver {
 public:
  void on_epoch_start(int64_t epoch, int64_t batches, int64_t first_batch) override {
    bar_ = std::make_unique<ProgressReporter>(fmt::format("epoch {}", epoch + 1), batches, "steps");
    if (first_batch > 0) bar_->update(first_batch);
  }
  void on_step(const train::StepLog& log) override {
    bar_->update(log.batch_in_epoch,
                 fmt::format("step {} loss {} lr {:.2e} {:.1f} img/s", log.step,
                             value_or_na(log.loss), log.lr, log.images_per_second));
  }
  void on_epoch_end(const train::EpochLog& log) override {
    bar_->finish();
    fmt::print(stderr,
               "epoch {}: train loss {}, val loss {:.4f}, val mean AUROC {}{}, {:.1f} img/s, "
               "next lr {:.2e}{}\n",
               log.epoch + 1, value_or_na(log.train_loss), log.val_loss,
               value_or_na(log.val_auroc.mean), log.best ? " (best)" : "", log.images_per_second,
               log.lr, log.lr_reduced ? " (reduced on plateau)" : "");
  }

 private:
  std::unique_ptr<ProgressReporter> bar_;
};

// Where the images come from and how they are turned into batches.
void add_data_flags(CLI::App& cmd, TrainFlags& f) {
  auto& d = f.trainer.data;
  cmd.add_option("--data", d.source,
                 "A data set's folder as downloaded (ChestX-ray14, CheXpert, MIMIC-CXR-JPG, "
                 "PadChest: see --dataset) or shards from `chexscale prepare`");
  add_dataset_flags(cmd, f.dataset);
  cmd.add_option("--batch-size", d.batch_size, "Images per worker per step (global = x workers)")
      ->capture_default_str();
  cmd.add_option("--image-size", d.image_size, "Resize images to this side before cropping")
      ->capture_default_str();
  cmd.add_option("--crop-size", d.crop_size, "Network input side (random crop in training)")
      ->capture_default_str();
  cmd.add_flag("--no-augment", f.no_augment, "Centre crop and no flip in training");
  cmd.add_option("--val-fraction", d.val_fraction,
                 "Fraction of train_val patients held out for validation")
      ->capture_default_str();
  cmd.add_option("--split-seed", d.split_seed, "Seed of the patient-wise splits")
      ->capture_default_str();
  cmd.add_option("--loader-threads", d.threads, "Image decoding threads per worker")
      ->capture_default_str();
  cmd.add_option("--val-threads", f.trainer.val_threads, "Image decoding threads for validation")
      ->capture_default_str();
  cmd.add_option("--prefetch", d.prefetch_batches, "Batches decoded ahead")->capture_default_str();
}

// The network and how it computes.
void add_model_flags(CLI::App& cmd, TrainFlags& f) {
  auto& t = f.trainer;
  cmd.add_option("--arch", t.model.arch, "Architecture (see `chexscale models`)")
      ->capture_default_str();
  cmd.add_option("--pretrained", t.pretrained,
                 "ImageNet (or other) weights: a torch.save .pth state dict (torchvision's "
                 "downloads) or safetensors; the 1000-way head is replaced");
  cmd.add_option("--dropout", t.model.dropout, "Dropout before the head")->capture_default_str();
  cmd.add_option("--amp", f.amp,
                 "Mixed precision of the forward pass: off, bf16 (CPU or GPU) or fp16 (GPU, with "
                 "dynamic loss scaling)")
      ->capture_default_str();
  cmd.add_flag("--channels-last", t.channels_last,
               "Channels-last (NHWC) layout of the model and batches (faster convolutions on "
               "GPUs with tensor cores)");
  cmd.add_option("--intra-op-threads", t.intra_op_threads,
                 "LibTorch threads per worker (0 = LibTorch's default; 1 = bit-reproducible)")
      ->capture_default_str();
}

// The optimizer, the learning-rate schedule and the loss.
void add_optimizer_flags(CLI::App& cmd, TrainFlags& f) {
  auto& t = f.trainer;
  cmd.add_option("--optimizer", f.optimizer, "adam or sgd")->capture_default_str();
  cmd.add_option("--lr", t.optimizer.lr, "Learning rate of one worker")->capture_default_str();
  cmd.add_option("--beta1", t.optimizer.beta1, "Adam beta1")->capture_default_str();
  cmd.add_option("--beta2", t.optimizer.beta2, "Adam beta2")->capture_default_str();
  cmd.add_option("--momentum", t.optimizer.momentum, "SGD momentum")->capture_default_str();
  cmd.add_option("--weight-decay", t.optimizer.weight_decay, "L2 weight decay")
      ->capture_default_str();
  cmd.add_flag("--scale-lr,!--no-scale-lr", t.schedule.scale_lr,
               "Multiply the lr by the number of workers (linear scaling rule)")
      ->capture_default_str();
  cmd.add_option("--warmup-epochs", t.schedule.warmup_epochs,
                 "Ramp the lr up over this many epochs (Horovod's recipe used 5)")
      ->capture_default_str();
  cmd.add_option("--plateau-factor", t.schedule.plateau_factor,
                 "Multiply the lr by this when the validation loss stops improving")
      ->capture_default_str();
  cmd.add_option("--plateau-patience", t.schedule.plateau_patience,
                 "Epochs without validation-loss improvement before reducing the lr")
      ->capture_default_str();
  cmd.add_flag("--class-weights,!--no-class-weights", t.class_weights,
               "Weight positives and negatives per class by the training label frequencies "
               "(the CheXNet paper)")
      ->capture_default_str();
}

// How long the run lasts and what it leaves behind: run directory, checkpoints, logs, seeds.
void add_run_flags(CLI::App& cmd, TrainFlags& f) {
  auto& t = f.trainer;
  cmd.add_option("--out", t.out_dir, "Run directory: config.yaml, metrics.jsonl, checkpoints/");
  cmd.add_option("--epochs", t.epochs, "Epochs to train")->capture_default_str();
  cmd.add_option("--max-steps", t.max_steps, "Stop after this many steps in all (0 = no limit)")
      ->capture_default_str();
  cmd.add_option("--seed", t.seed, "Seed of the model initialisation and of the data order")
      ->capture_default_str();
  cmd.add_option("--checkpoint-every", t.checkpoint_every,
                 "Steps between checkpoints (0 = at epoch ends only)")
      ->capture_default_str();
  cmd.add_option("--keep-checkpoints", t.keep_checkpoints, "Step checkpoints kept (newest)")
      ->capture_default_str();
  cmd.add_option("--resume", f.resume,
                 "auto = continue from the newest valid checkpoint of --out (if any), or the path "
                 "of a checkpoint's .json");
  cmd.add_option("--log-every", t.log_every, "Steps between metrics.jsonl records")
      ->capture_default_str();
  cmd.add_option("--on-nan", f.on_nan, "On a non-finite loss: stop (naming the step) or skip")
      ->capture_default_str();
  cmd.add_option("--stop-grace", t.stop_grace,
                 fmt::format("Seconds to stop in on SIGTERM, SIGINT or SIGUSR1 (checkpoint, then "
                             "exit {}; a second signal or the grace running out ends at once)",
                             train::kExitPreempted))
      ->capture_default_str();
  cmd.add_option("--record-examples", t.record_examples,
                 "Debug: each rank appends the dataset indices of every step it trains to "
                 "PATH.rank<r> (\"<round> <epoch> <step> <index>...\" lines), once the ranks "
                 "agree to train it and before its gradients are summed; a step trained again "
                 "in a later round supersedes it");
  cmd.add_option("--timeline", t.timeline,
                 "Write a Chrome trace of step phases and allreduces (rank r writes .rank<r>.json; "
                 "rank 0 merges the files it can see at the end)");
}

void add_options(CLI::App& cmd, TrainFlags& f) {
  add_data_flags(cmd, f);
  add_model_flags(cmd, f);
  add_optimizer_flags(cmd, f);
  add_run_flags(cmd, f);
  add_distributed_flags(cmd, f.dist);
  add_reducer_flags(cmd, f.reducer);
}

void print_summary(const train::TrainSummary& s, const std::string& out_dir) {
  fmt::print(
      "trained {} steps in {:.1f} s: {:.1f} images/s (per step: data {:.3f} s, forward {:.3f} "
      "s, backward {:.3f} s, exposed comm {:.3f} s, optimizer {:.3f} s)\n",
      s.steps, s.train_seconds, s.images_per_second, s.mean_step.data_wait, s.mean_step.forward,
      s.mean_step.backward, s.mean_step.comm_exposed, s.mean_step.optimizer);
  if (s.best_mean_auroc) {
    fmt::print("best validation mean AUROC {:.4f}: {}\n", *s.best_mean_auroc, s.best_checkpoint);
  } else if (!s.last_checkpoint.empty()) {
    fmt::print("no epoch finished, so no validation yet: the last checkpoint is {}\n",
               s.last_checkpoint);
  }
  if (s.bad_images > 0) fmt::print("{} bad images were skipped (see the log)\n", s.bad_images);
  if (s.empty_batch_steps > 0) {
    fmt::print("{} steps were skipped: every image of a worker's batch failed to decode\n",
               s.empty_batch_steps);
  }
  if (s.non_finite_steps > 0) {
    fmt::print("{} steps were skipped: non-finite loss or gradients\n", s.non_finite_steps);
  }
  fmt::print("run directory: {} (config.yaml, metrics.jsonl, checkpoints/)\n", out_dir);
}

// The elastic round this worker trains in, and its nodes (chexscale launch's).
void take_membership(const distributed::DistContext& ctx, train::TrainerOptions& o) {
  if (const distributed::ElasticRound* round = ctx.elastic_round()) {  // --elastic in-place
    o.membership_round = round->round();
    o.membership_nodes = round->nodes();
  } else if (const char* round = std::getenv(distributed::kEnvElasticRound)) {  // restart path
    o.membership_round = std::atoi(round);
    const char* names = std::getenv(distributed::kEnvElasticNodes);
    std::istringstream nodes(names != nullptr ? names : "");
    for (std::string node; std::getline(nodes, node, ',');)
      o.membership_nodes.push_back(node);
  }
}

}  // namespace

void add_train_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "train",
      fmt::format(
          "Train CheXNet (default: DenseNet-121, Adam {:g}, class-weighted BCE, lr / 10 on a\n"
          "validation-loss plateau, {} crops of {}, random flips). Each epoch ends with the\n"
          "validation loss and per-class AUROC; checkpoints resume exactly (--resume auto).",
          train::kDefaultLearningRate, data::kDefaultCropSize, data::kDefaultImageSize));
  auto f = std::make_shared<TrainFlags>();
  add_options(*cmd, *f);
  registry.add(cmd, [f](const RunContext& run) {
    train::TrainerOptions o = f->resolved();
    o.stop_request = &install_stop_signals(o.stop_grace);
    if (o.intra_op_threads > 0) torch::set_num_threads(o.intra_op_threads);
    o.dist = f->dist.resolved();
    auto ctx = distributed::DistContext::init(o.dist);
    take_membership(*ctx, o);
    train::check_amp_supported(o.amp, ctx->device());  // before loading anything
    ProgressPrinter progress;
    train::TrainSummary summary;
    {
      // The trainer checks every option and opens the data first, so a run refused for bad
      // input leaves no run directory behind; config.yaml is written once it is accepted.
      train::Trainer trainer(o, ctx, ctx->is_main() ? &progress : nullptr);
      const bool standby = ctx->elastic_round() != nullptr && ctx->elastic_round()->in_standby();
      if (ctx->is_main() && !standby) {  // a worker in standby has no rank yet
        make_dirs(o.out_dir);
        write_file_atomic((std::filesystem::path(o.out_dir) / "config.yaml").string(),
                          run.config.to_yaml(run.cmd));
      }
      ctx.reset();  // the trainer's alone: a regroup in place replaces it
      summary = trainer.run();
      ctx = trainer.context();
    }  // closes this rank's timeline writer (its final write)
    if (!o.timeline.empty()) {
      ctx->barrier();
      if (ctx->is_main()) merge_rank_timelines(o.timeline, ctx->world_size());
    }
    if (summary.stopped) {
      if (ctx->is_main()) {
        fmt::print(stderr,
                   "stopping at step {} on {}: checkpoint written to {}, exit {} (resume with "
                   "--resume auto)\n",
                   summary.steps, train::stop_signal_name(summary.stop_signal),
                   summary.last_checkpoint, train::kExitPreempted);
      }
      ctx->barrier();  // no worker exits (and gets the others torn down) before that line
      stopped_at_checkpoint();
      return train::kExitPreempted;
    }
    if (ctx->is_main()) print_summary(summary, o.out_dir);
    return 0;
  });
}

}  // namespace chexscale::cli
