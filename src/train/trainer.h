// The CheXNet training loop on one worker or many: epochs of TrainStep, validation loss and
// per-class AUROC after each epoch (gathered across ranks), the LR schedule, checkpoints that
// resume exactly, and metrics.jsonl. Rank 0 writes the run's files; every rank trains. Under
// `chexscale launch --elastic in-place` a worker outlives its round: when the round ends (a node
// lost, or one joining) it builds the next round's process group, the rank holding the newest
// training state sends it to every rank from memory, and training goes on.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "data/loader.h"
#include "distributed/context.h"
#include "distributed/reducer.h"
#include "models/classifier.h"
#include "train/auroc.h"
#include "train/optimizer.h"
#include "train/schedule.h"
#include "train/step.h"
#include "train/stop_contract.h"

namespace chexscale::train {

// Where a run starts (--resume): afresh, from the newest valid checkpoint of the run directory,
// or from the checkpoint whose manifest is named.
struct ResumeFrom {
  enum class Kind { kFresh, kLatest, kManifest };
  Kind kind = Kind::kFresh;
  std::string manifest;  // with kManifest
};

// "" (afresh), "auto" (the newest checkpoint) or a manifest's path; parse_resume's inverse.
std::string to_string(const ResumeFrom& resume);
ResumeFrom parse_resume(std::string_view text);

struct TrainerOptions {
  models::ModelOptions model;
  std::string pretrained;    // safetensors weights to start from (head replaced when 1000-way)
  data::LoaderOptions data;  // train split; rank, world size and split are set by the trainer
  int val_threads = data::kDefaultLoaderThreads;  // loader threads for validation
  int intra_op_threads = 0;  // LibTorch threads, set by the caller (process-wide); 0 = its default
  OptimizerOptions optimizer;  // lr = per-worker base lr
  ScheduleOptions schedule;    // base_lr and world_size are set by the trainer
  bool class_weights = true;   // the paper's per-class positive/negative weighting
  int64_t epochs = 3;
  int64_t max_steps = 0;         // stop after this many optimizer steps in all (0 = no limit)
  int64_t checkpoint_every = 0;  // steps between checkpoints (0 = only at epoch ends)
  int keep_checkpoints = 3;
  std::string out_dir;  // the run directory (checkpoints/, metrics.jsonl)
  ResumeFrom resume;
  int64_t log_every = 10;  // steps between metrics.jsonl step records
  NonFinitePolicy non_finite = NonFinitePolicy::kStop;
  AmpMode amp = AmpMode::kOff;  // mixed precision of the training forward pass (--amp)
  bool channels_last = false;   // NHWC model and batches (--channels-last)
  distributed::ReducerOptions reducer;
  // How the context's process group was made: a worker regrouping in place (--elastic in-place)
  // makes its next one alike.
  distributed::DistOptions dist;
  std::string timeline;  // Chrome trace path ("" = none)
  uint64_t seed = 0;     // model initialisation; the loader has its own seed
  // A request to stop: nonzero = the signal that asked (set by the caller's signal handler; null
  // = never). Read before every step; the ranks agree on the step inside the step's collective.
  const std::atomic<int>* stop_request = nullptr;
  int stop_grace = kDefaultStopGrace;  // seconds to stop in; the caller enforces it
  // Under an elastic launcher: the rendezvous round and its nodes, recorded in metrics.jsonl as a
  // "membership" record when the run starts (-1: not elastic).
  int membership_round = -1;
  std::vector<std::string> membership_nodes;
  // Debug (--record-examples): each rank appends "<round> <epoch> <step> <index>..." for every
  // step it trains to <path>.rank<r> ("" = none).
  std::string record_examples;

  // UsageError naming the field of the first value out of range, its parts' (model, data,
  // optimizer, schedule) included; reads no file. The trainer calls it first.
  void validate() const;
};

// What a logged step reports (rank 0's view; loss averaged over ranks).
struct StepLog {
  int64_t step = 0;  // optimizer steps done in all
  int64_t epoch = 0;
  int64_t batch_in_epoch = 0;  // batches of this epoch done
  int64_t batches_per_epoch = 0;
  // Mean over ranks and over the steps since the last record that were not skipped; none when
  // every one of them was skipped.
  std::optional<double> loss;
  int64_t skipped_steps = 0;  // since the last record (empty batches, non-finite values)
  double lr = 0;
  double images_per_second = 0;  // global, since the last record
  StepTimes times;               // this rank's mean per step since the last record
};

struct EpochLog {
  int64_t epoch = 0;
  int64_t step = 0;
  std::optional<double> train_loss;  // none when every step of the epoch was skipped
  int64_t skipped_steps = 0;
  double val_loss = 0;
  AurocReport val_auroc;
  double lr = 0;
  bool lr_reduced = false;
  bool best = false;
  double seconds = 0;
  double images_per_second = 0;
};

// Rank 0 receives these to show progress (the CLI draws the bar).
class TrainerObserver {
 public:
  virtual ~TrainerObserver() = default;
  virtual void on_epoch_start(int64_t epoch, int64_t batches_per_epoch, int64_t first_batch) {}
  virtual void on_step(const StepLog& log) {}
  virtual void on_epoch_end(const EpochLog& log) {}
};

struct TrainSummary {
  int64_t steps = 0;
  int64_t epochs_done = 0;
  std::optional<double> best_mean_auroc;
  std::string best_checkpoint;  // manifest path ("" when no epoch finished)
  std::string last_checkpoint;
  double train_seconds = 0;
  double images_per_second = 0;  // global, training steps only
  StepTimes mean_step;           // rank 0's mean step breakdown
  int64_t resumed_from_step = -1;
  int64_t bad_images = 0;
  // Steps that did not update the weights (this process's run; consumed data all the same):
  int64_t empty_batch_steps = 0;  // every image of some worker's batch failed to decode
  int64_t non_finite_steps = 0;   // non-finite loss or gradients with --on-nan skip
  // Stopped on request (stop_request) at step `steps`, last_checkpoint written there; the
  // signal that asked (0 when the workers got different ones).
  bool stopped = false;
  int stop_signal = 0;
};

class Trainer {
 public:
  Trainer(TrainerOptions options, std::shared_ptr<distributed::DistContext> ctx,
          TrainerObserver* observer = nullptr);
  ~Trainer();
  TrainSummary run();
  // The job's context now: the one given, or the one of the last in-place regroup.
  std::shared_ptr<distributed::DistContext> context() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace chexscale::train
