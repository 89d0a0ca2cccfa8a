// The training loop: epochs, validation, schedule, checkpoints and resume (see trainer.h).
#include "train/trainer.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "common/error.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/timeline.h"
#include "common/timer.h"
#include "data/example_source.h"
#include "distributed/elastic_round.h"
#include "distributed/metrics.h"
#include "distributed/watchdog.h"
#include "models/registry.h"
#include "models/weights.h"
#include "train/checkpoint.h"
#include "train/checkpoint_share.h"
#include "train/checkpoint_writer.h"
#include "train/evaluate.h"
#include "train/metrics_log.h"
#include "train/regroup_clock.h"
#include "train/regroup_state.h"
#include "train/run_checkpoint.h"
#include "train/run_state.h"

namespace chexscale::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kResumeLatest = "auto";

BceWithLogitsLoss make_loss(const TrainerOptions& o) {
  if (!o.class_weights) return BceWithLogitsLoss();
  if (o.data.synthetic) {
    log::warn("random synthetic tensors have no label frequencies: unweighted loss");
    return BceWithLogitsLoss();
  }
  const auto source = data::open_example_source(o.data);
  const size_t classes = source->label_names().size();
  std::vector<int64_t> positives(classes, 0);
  std::vector<int64_t> known(classes, 0);
  for (int64_t i = 0; i < source->size(); ++i) {
    const data::LabelBits bits = source->labels(i);
    const data::LabelBits known_bits = source->known(i);
    for (size_t c = 0; c < classes; ++c) {
      if (!data::has_label(known_bits, static_cast<int>(c))) continue;
      ++known[c];
      positives[c] += data::has_label(bits, static_cast<int>(c));
    }
  }
  return BceWithLogitsLoss(class_weights_from_counts(positives, known));
}

}  // namespace

std::string to_string(const ResumeFrom& resume) {
  switch (resume.kind) {
    case ResumeFrom::Kind::kLatest:
      return kResumeLatest;
    case ResumeFrom::Kind::kManifest:
      return resume.manifest;
    case ResumeFrom::Kind::kFresh:
      break;
  }
  return "";
}

ResumeFrom parse_resume(std::string_view text) {
  if (text.empty()) return {};
  if (text == kResumeLatest) return {ResumeFrom::Kind::kLatest, ""};
  return {ResumeFrom::Kind::kManifest, std::string(text)};
}

void TrainerOptions::validate() const {
  model.validate();
  data.validate();
  models::check_input_side(model.arch, data.crop_size, "crop_size");
  if (val_threads < 1 || val_threads > kMaxThreads) {
    throw UsageError(fmt::format("val_threads {} is not in [1, {}]", val_threads, kMaxThreads));
  }
  if (intra_op_threads < 0 || intra_op_threads > kMaxThreads) {
    throw UsageError(
        fmt::format("intra_op_threads {} is not in [0, {}]", intra_op_threads, kMaxThreads));
  }
  optimizer.validate();
  ScheduleOptions as_run = schedule;  // the trainer sets these two
  as_run.base_lr = optimizer.lr;
  as_run.world_size = 1;
  as_run.validate();
  if (epochs < 1) throw UsageError(fmt::format("epochs must be at least 1, got {}", epochs));
  if (max_steps < 0) {
    throw UsageError(fmt::format("max_steps must be >= 0 (0 = no limit), got {}", max_steps));
  }
  if (checkpoint_every < 0) {
    throw UsageError(fmt::format("checkpoint_every must be >= 0, got {}", checkpoint_every));
  }
  if (keep_checkpoints < 1) {
    throw UsageError(fmt::format("keep_checkpoints must be at least 1, got {}", keep_checkpoints));
  }
  if (data.source.empty() && !data.synthetic) {
    throw UsageError("a data set is needed (`source`)");
  }
  if (out_dir.empty()) throw UsageError("a run directory is needed (`out_dir`)");
  if (log_every < 1)
    throw UsageError(fmt::format("log_every must be at least 1, got {}", log_every));
  if (stop_grace < 1 || stop_grace > kMaxStopGrace) {
    throw UsageError(
        fmt::format("stop_grace {} is not in [1, {}] seconds", stop_grace, kMaxStopGrace));
  }
  if (non_finite == NonFinitePolicy::kIgnore) {
    throw UsageError("non_finite must be stop or skip in training, not 'ignore'");
  }
}

class Trainer::Impl {
 public:
  Impl(TrainerOptions o, std::shared_ptr<distributed::DistContext> ctx, TrainerObserver* observer)
      : opt_(std::move(o)), ctx_(std::move(ctx)), observer_(observer) {
    CHX_CHECK(ctx_ != nullptr, "the trainer needs a DistContext");
    opt_.validate();
    device_ = ctx_->device();
    main_ = ctx_->is_main();

    if (ctx_->elastic_round() && !opt_.timeline.empty()) {
      throw UsageError(
          "`timeline` with --elastic in-place: a worker's rank changes from round to round, so "
          "per-rank timelines would mix ranks; trace a run of fixed size");
    }
    make_loaders();
    // The head has one output per label of the data set's label set.
    opt_.model.num_classes = static_cast<int64_t>(train_loader_->label_names().size());

    torch::manual_seed(opt_.seed);
    model_ = models::make_model(opt_.model);
    if (!opt_.pretrained.empty()) models::load_weights(*model_, opt_.pretrained);
    model_->to(device_);
    params_ = model_->parameters();

    loss_ = make_loss(opt_);
    opt_.schedule.base_lr = opt_.optimizer.lr;
    opt_.schedule.world_size = ctx_->world_size();
    schedule_ = std::make_unique<LrSchedule>(opt_.schedule);
    optimizer_ = make_optimizer(params_, opt_.optimizer);
    if (!opt_.timeline.empty()) {
      timeline_ = std::make_unique<TimelineWriter>(
          timeline_path_for_rank(opt_.timeline, ctx_->rank()), TimelineOptions{ctx_->rank()});
    }
    make_reducer_and_step();
    store_ = std::make_unique<CheckpointStore>((fs::path(opt_.out_dir) / "checkpoints").string(),
                                               opt_.keep_checkpoints);
    writer_ = std::make_unique<CheckpointWriter>(*store_);
    open_metrics();
  }

  TrainSummary run() {
    TrainSummary summary;
    TrainTotals totals;
    bool first = true;
    if (const distributed::ElasticRound* round = ctx_->elastic_round();
        round != nullptr && round->in_standby()) {
      // Built while the other nodes train: only now does this node join their next round.
      warm_up();
      ctx_->elastic_round()->announce_ready();
      regroup("");
    }
    while (true) {
      try {
        const int64_t from = enter();
        if (first) summary.resumed_from_step = from;
        first = false;
        train_epochs(summary, totals);
        if (ctx_->elastic_round()) expect_same_end_state();
        break;
      } catch (const DistError& e) {
        if (!ctx_->elastic_round()) throw;
        regroup(e.what());
      }
    }
    return finish(summary, totals);
  }

  std::shared_ptr<distributed::DistContext> context() const { return ctx_; }

 private:
  // The train and validation loaders for this rank of this world size.
  void make_loaders() {
    opt_.data.rank = ctx_->rank();
    opt_.data.world_size = ctx_->world_size();
    opt_.data.split = data::Split::kTrain;
    opt_.data.pin_memory = device_.is_cuda();  // pinned batches copy to the GPU asynchronously
    train_loader_ = std::make_unique<data::Loader>(opt_.data);
    data::LoaderOptions val = opt_.data;
    val.split = data::Split::kVal;
    val.augment = false;
    val.shuffle = false;
    val.threads = opt_.val_threads;
    val_loader_ = std::make_unique<data::Loader>(val);
  }

  // After a regroup: the loaders serve this rank of the new world (their threads and data set
  // stay). A survivor's pass most likely goes on from its own position: its first batches load
  // while the state is exchanged (a pass that starts elsewhere replaces them).
  void reshard_loaders() {
    opt_.data.rank = ctx_->rank();
    opt_.data.world_size = ctx_->world_size();
    train_loader_->reshard(ctx_->rank(), ctx_->world_size());
    val_loader_->reshard(ctx_->rank(), ctx_->world_size());
    if (holds_state_ && pos_.epoch < opt_.epochs)
      train_loader_->start_epoch(pos_.epoch, pass_start(ctx_->world_size()));
  }

  // Where this rank's pass over epoch pos_.epoch goes on in a world of `world` ranks (the rule
  // of resume_position: in another layout, a new pass over the epoch's rest).
  data::EpochStart pass_start(int world) const {
    if (world == position_world_size_) return {pos_.epoch_offset, pos_.batches_done};
    return {std::min(train_loader_->dataset_size(), pos_.samples_done), 0};
  }

  // A newcomer waiting in standby warms its model (kernels, allocator, autograd's threads) with
  // one forward and backward pass on a batch of zeros, so that its first step in a round, which
  // the others wait for, is not a cold one. No weight or optimizer state changes; BatchNorm's
  // statistics and the RNG are put back and the gradients dropped.
  void warm_up() {
    const Stopwatch clock;
    std::vector<torch::Tensor> buffers;
    for (const torch::Tensor& b : model_->buffers())
      buffers.push_back(b.clone());
    const torch::Tensor rng = cpu_rng_state();
    data::Batch batch;
    const int64_t n = opt_.data.batch_size;
    batch.images = torch::zeros({n, 3, opt_.data.crop_size, opt_.data.crop_size});
    batch.labels = torch::zeros({n, opt_.model.num_classes});
    step_->warm_up(batch);
    const torch::NoGradGuard no_grad;
    const std::vector<torch::Tensor> live = model_->buffers();
    for (size_t i = 0; i < live.size(); ++i)
      live[i].copy_(buffers[i]);
    set_cpu_rng_state(rng);
    log::info("warmed the model in standby in {:.2f} s", clock.seconds());
  }

  // The gradient reducer of the context (several ranks) and the step that uses it.
  void make_reducer_and_step() {
    if (ctx_->world_size() > 1) {
      reducer_ = std::make_unique<distributed::GradientReducer>(ctx_, params_, opt_.reducer,
                                                                timeline_.get());
    }
    TrainStepOptions step_options;
    step_options.non_finite = opt_.non_finite;
    step_options.device = device_;
    step_options.amp = opt_.amp;
    step_options.channels_last = opt_.channels_last;
    step_ = std::make_unique<TrainStep>(model_, *optimizer_, loss_, reducer_.get(), step_options);
  }

  // metrics.jsonl, which only rank 0 writes (appending: a regroup may make another rank rank 0).
  void open_metrics() {
    if (!main_) {
      metrics_.reset();
    } else if (!metrics_) {
      metrics_ = std::make_unique<MetricsLog>((fs::path(opt_.out_dir) / "metrics.jsonl").string());
    }
  }

  // Every rank's training state at the start of a round: the newest one a rank holds in memory
  // (an in-place regroup's survivors), sent from the lowest such rank (all of it, or only what
  // each rank keeps of its own when every rank holds that step) and checked equal everywhere;
  // else rank 0's weights and the checkpoint --resume names. Returns the step it starts from
  // (-1: afresh). Records the round in metrics.jsonl under an elastic launcher.
  int64_t enter() {
    std::optional<int64_t> held_step;
    if (held_) held_step = pos_.global_step;
    const StateHolders holders =
        ctx_->elastic_round() ? newest_state(*ctx_, held_step) : StateHolders{};
    int64_t from = -1;
    if (holders.root < 0) {
      if (ctx_->world_size() > 1) distributed::broadcast_module(*ctx_, *model_);
      from = resume();
    } else {
      std::string how = take_newest_state(holders);
      if (how.empty()) how = share_whole_state(holders.root);
      if (main_) {
        const std::string pause = left_round_ < 0
                                      ? std::string("this rank is new")
                                      : fmt::format("{:.2f} s since this rank left round {}",
                                                    regroup_clock_.seconds(), left_round_);
        log::info("round {}: every rank {} and holds the same bytes; {}", opt_.membership_round,
                  how, pause);
      }
      from = pos_.global_step;
    }
    held_.reset();
    if (main_ && opt_.membership_round >= 0) {
      metrics_->append({{"type", "membership"},
                        {"round", opt_.membership_round},
                        {"world_size", ctx_->world_size()},
                        {"nodes", opt_.membership_nodes},
                        {"step", pos_.global_step}});
    }
    return from;
  }

  // --elastic in-place: the proof that every rank ends with the same bytes, whatever rounds
  // the run went through.
  void expect_same_end_state() {
    const uint64_t digest = digest_of_state();
    expect_same_state(*ctx_, digest, 0, "at the end of the run");
    if (main_) {
      log::info(
          "round {}: the run ends at step {} with every rank ({}) holding the same bytes "
          "(digest {:016x})",
          opt_.membership_round, pos_.global_step, ctx_->world_size(), digest);
    }
  }

  // The ranks holding the newest step (survivors that all did the same steps) hold the same
  // parameters and optimizer state; what each keeps of its own (BatchNorm's running statistics,
  // its loss sums, its RNG) is a few kB, taken from `h.root`. The ranks that lack that step
  // (newcomers, or a rank a step behind) get all of it from `h.root`, point to point. Returns
  // how, or "" when the digests then differ (then all must be sent to all).
  std::string take_newest_state(const StateHolders& h) {
    const bool lacking =
        std::find(h.lacking.begin(), h.lacking.end(), ctx_->rank()) != h.lacking.end();
    std::optional<Checkpoint> whole;
    if (!h.lacking.empty()) {
      whole = send_checkpoint(*ctx_, h.root, h.lacking, [this] { return held_; });
    }
    const std::optional<Checkpoint> part = share_checkpoint(
        *ctx_, h.root, [this] { return std::optional<Checkpoint>(per_rank_part(*held_)); });
    if (ctx_->rank() == h.root) {
      restore_from(*part, RestoreTensors::kRngOnly);
    } else {
      restore_from(lacking ? *whole : *part,
                   lacking ? RestoreTensors::kAll : RestoreTensors::kBuffersAndRng);
    }
    const double part_kb = static_cast<double>(tensor_bytes(part->tensors)) / 1e3;
    // What the root sent to each rank that lacked it (a holder's own state is as large).
    const double whole_mb =
        static_cast<double>(tensor_bytes(whole ? whole->tensors : held_->tensors)) / 1e6;
    regroup_clock_.lap(
        "state", whole ? fmt::format("{:.1f} MB", whole_mb) : fmt::format("{:.1f} kB", part_kb));
    const bool same = same_state_everywhere(*ctx_, digest_of_state());
    regroup_clock_.lap("digest");
    if (!same) return "";
    if (h.lacking.empty()) {
      return fmt::format(
          "held the same parameters and optimizer state already (step {}; rank {} sent the rest, "
          "{:.1f} kB)",
          pos_.global_step, h.root, part_kb);
    }
    return fmt::format("took rank {}'s training state from memory (step {}, {:.1f} MB)", h.root,
                       pos_.global_step, whole_mb);
  }

  // Rank `root` sends its whole state to every rank; all must then hold the same bytes. Returns
  // how.
  std::string share_whole_state(int root) {
    const std::optional<Checkpoint> state = share_checkpoint(*ctx_, root, [this] { return held_; });
    restore_from(*state, ctx_->rank() == root ? RestoreTensors::kRngOnly : RestoreTensors::kAll);
    const std::string mb =
        fmt::format("{:.1f} MB", static_cast<double>(tensor_bytes(state->tensors)) / 1e6);
    regroup_clock_.lap("state", mb);
    expect_same_state(*ctx_, digest_of_state(), root, "after the regroup");
    regroup_clock_.lap("digest");
    return fmt::format("took rank {}'s training state from memory (step {}, {})", root,
                       pos_.global_step, mb);
  }

  static int64_t tensor_bytes(const std::vector<models::NamedTensor>& tensors) {
    int64_t bytes = 0;
    for (const models::NamedTensor& t : tensors)
      bytes += static_cast<int64_t>(t.tensor.nbytes());
    return bytes;
  }

  // What of a rank's state `c` is its own during training (buffers such as BatchNorm's running
  // statistics, the RNG, the position's loss sums): all but the parameters and optimizer state.
  Checkpoint per_rank_part(const Checkpoint& c) const {
    std::set<const void*> parameters;
    for (const torch::Tensor& p : params_)
      parameters.insert(p.data_ptr());
    Checkpoint part;
    part.state = c.state;
    part.path = c.path;
    for (const models::NamedTensor& t : c.tensors) {
      const bool model = t.name.rfind("model.", 0) == 0;
      if ((model && parameters.count(t.tensor.data_ptr()) == 0) || t.name.rfind("rng.", 0) == 0)
        part.tensors.push_back(t);
    }
    return part;
  }

  // The digest of this rank's training state (regroup_state.h), PowerSGD's steps and warm
  // start included (its residuals are each rank's own).
  uint64_t digest_of_state() const {
    std::vector<models::NamedTensor> tensors =
        run_checkpoint_tensors(*model_, *optimizer_, params_);
    nlohmann::json state = memory_state_json();
    if (const auto compression = reducer_ ? reducer_->common_compression_state() : std::nullopt) {
      state["powersgd_steps"] = compression->steps;
      for (const auto& [name, tensor] : compression->tensors)
        tensors.push_back({"powersgd." + name, tensor});
    }
    return state_digest(tensors, state);
  }

  // This rank's training state as a checkpoint in memory (position, model, optimizer, loss
  // scale, schedule), laid out for the world size it was trained at.
  Checkpoint memory_checkpoint() const {
    Checkpoint c;
    c.tensors = run_checkpoint_tensors(*model_, *optimizer_, params_);
    c.state = memory_state_json();
    c.path = fmt::format("the memory of rank {} in round {}", ctx_->rank(), opt_.membership_round);
    return c;
  }

  nlohmann::json memory_state_json() const {
    nlohmann::json state = state_json(pos_);
    add_loss_scaler_state(state, step_->loss_scaler());
    return state;
  }

  // The round ended (`why`): keeps this rank's training state in memory (a rank that has
  // one), waits for its agent's place in the next round, and builds that round's process group,
  // loaders, reducer and step; enter() then sends the newest state to every rank.
  void regroup(const std::string& why) {
    regroup_clock_.start();
    distributed::ElasticRound& round = *ctx_->elastic_round();
    const bool standby = round.in_standby();
    const std::string cause = why.substr(0, why.find('\n'));
    if (!standby) {
      left_round_ = round.round();
      log::warn("rank {}: {}; regrouping in place", ctx_->rank(), cause);
    }
    if (holds_state_) held_ = memory_checkpoint();
    if (!round.ended()) round.request_regroup(cause);
    // In standby, twice the agent's own wait for the round, so that the agent says why none came.
    const auto timeout =
        std::chrono::duration_cast<std::chrono::milliseconds>(opt_.dist.rdzv_timeout);
    const distributed::ElasticPlace place = round.wait_next_place(standby ? 2 * timeout : timeout);
    regroup_clock_.lap("place");
    const auto env = round.environment_for(place);
    const bool failed = ctx_->watchdog() != nullptr && ctx_->watchdog()->failed();
    if (reducer_) {
      reducer_->detach();
      // The lost group's threads may still write into a failed reducer's buffers.
      if (failed) retired_reducers_.push_back(std::move(reducer_));
      reducer_.reset();
    }
    step_.reset();
    ctx_.reset();
    // The place's round, or a later one if it ended before its ranks met.
    ctx_ = distributed::DistContext::init(opt_.dist, env);
    regroup_clock_.lap("group");
    main_ = ctx_->is_main();
    // Another rank writes the checkpoints now: this one's last write ends first, so that two
    // processes never write the same step's files. A rank that writes them now and never did
    // maps its buffer meanwhile.
    if (!main_) writer_->wait();
    if (main_) writer_->map_buffer(checkpoint_bytes());
    opt_.membership_round = ctx_->elastic_round()->round();
    opt_.membership_nodes = ctx_->elastic_round()->nodes();
    opt_.schedule.world_size = ctx_->world_size();
    reshard_loaders();
    regroup_clock_.lap("loaders");
    make_reducer_and_step();
    open_metrics();
    regroup_clock_.lap("reducer");
  }

  // The first step after an in-place regroup ended (its times `t`): this rank's regroup line.
  void log_regroup_times(const StepTimes& t) {
    regroup_clock_.lap("first step",
                       fmt::format("its data wait {:.3f} s, step {:.3f} s", t.data_wait, t.total));
    log::info("round {}: rank {}{} regrouped in {}", opt_.membership_round, ctx_->rank(),
              left_round_ < 0 ? " (new)" : "", regroup_clock_.finish());
  }

  // Steps since the last step record.
  struct Window {
    Stopwatch clock;
    double loss_sum = 0;
    int64_t loss_steps = 0;  // steps in loss_sum (not skipped)
    int64_t skipped = 0;
    int64_t steps = 0;
    int64_t images = 0;
    StepTimes times;
    void add(const StepResult& r) {
      if (r.skipped) {
        ++skipped;
      } else {
        loss_sum += r.loss;
        ++loss_steps;
      }
      ++steps;
      images += r.images;
      times += r.times;
    }
  };

  // The run's training steps over all epochs (validation excluded).
  struct TrainTotals {
    double seconds = 0;
    int64_t images = 0;
    StepTimes step_sum;
    int64_t steps = 0;
  };

  // What one epoch's training loop did.
  struct EpochSteps {
    int64_t images = 0;
    bool stop = false;  // --max-steps reached
  };

  // The epochs from pos_ on, until the last, --max-steps or a stop request.
  void train_epochs(TrainSummary& summary, TrainTotals& totals) {
    // A run resumed at or past max_steps has nothing left to train (the loop below checks the
    // limit only after a step).
    bool stop = opt_.max_steps > 0 && pos_.global_step >= opt_.max_steps;
    if (stop && main_) {
      log::info("resumed at step {}: max_steps {} is reached, nothing to train", pos_.global_step,
                opt_.max_steps);
    }
    for (; pos_.epoch < opt_.epochs && !stop; ++pos_.epoch) {
      Stopwatch epoch_clock;
      const int64_t bpe = train_loader_->batches_per_epoch(pos_.epoch_offset);  // of this pass
      if (observer_ && main_) observer_->on_epoch_start(pos_.epoch, bpe, pos_.batches_done);
      const EpochSteps steps = train_epoch(bpe, totals, summary);
      stop = steps.stop;
      if (summary.stopped) break;                  // on request: no validation
      if (stop && pos_.batches_done < bpe) break;  // max_steps mid-epoch: no validation
      end_epoch(epoch_clock, steps.images, bpe, summary);
    }
  }

  // Trains the rest of epoch pos_.epoch, or up to --max-steps; logs a step record every
  // --log-every steps and at the end, checkpoints every --checkpoint-every steps and at a stop.
  EpochSteps train_epoch(int64_t bpe, TrainTotals& totals, TrainSummary& summary) {
    EpochSteps epoch;
    train_loader_->start_epoch(pos_.epoch, {pos_.epoch_offset, pos_.batches_done});
    Window window;
    Stopwatch train_clock;
    while (auto batch = train_loader_->next()) {
      const double lr = schedule_->lr_at(pos_.epoch + epoch_fraction_after_step(bpe));
      set_learning_rate(*optimizer_, lr);
      const int64_t start_us = now_micros();
      std::optional<StepResult> stepped = run_step(*batch);
      if (!stepped) {  // stop requested: the batch is left for the resume
        if (window.steps > 0) log_step(window, lr, bpe);
        summary.stopped = true;
        summary.stop_signal = stop_signal_;
        summary.last_checkpoint = save_checkpoint(pos_, false);
        break;
      }
      StepResult& r = *stepped;
      r.times.data_wait = train_loader_->last_wait_seconds();
      if (regroup_clock_.running()) log_regroup_times(r.times);
      record_timeline(start_us, r.times);
      advance_position(r, bpe);
      window.add(r);
      totals.step_sum += r.times;
      ++totals.steps;
      epoch.images += r.images;
      const bool epoch_end = pos_.batches_done == bpe;
      epoch.stop = opt_.max_steps > 0 && pos_.global_step >= opt_.max_steps;
      if (pos_.global_step % opt_.log_every == 0 || epoch_end || epoch.stop) {
        log_step(window, lr, bpe);
      }
      if ((opt_.checkpoint_every > 0 && pos_.global_step % opt_.checkpoint_every == 0) ||
          epoch.stop) {
        summary.last_checkpoint = save_checkpoint(pos_, false);
      }
      if (epoch.stop) break;
    }
    totals.seconds += train_clock.seconds();
    totals.images += epoch.images;
    return epoch;
  }

  // The share of epoch pos_.epoch done once the next step is taken: what earlier layouts
  // consumed of its permutation, then this pass's `bpe` batches as equal shares of the rest (a
  // whole epoch's pass: batches done / bpe).
  double epoch_fraction_after_step(int64_t bpe) const {
    const double before =
        static_cast<double>(pos_.epoch_offset) / static_cast<double>(train_loader_->dataset_size());
    return before +
           (1.0 - before) * static_cast<double>(pos_.batches_done + 1) / static_cast<double>(bpe);
  }

  // The data position and the epoch's loss after a step (skipped or not) of a pass of `bpe`
  // batches.
  void advance_position(const StepResult& r, int64_t bpe) {
    ++pos_.global_step;
    ++pos_.batches_done;
    pos_.samples_done =
        pos_.batches_done == bpe
            ? train_loader_->dataset_size()
            : pos_.epoch_offset + pos_.batches_done * opt_.data.batch_size * ctx_->world_size();
    if (r.skipped) {
      ++pos_.epoch_skipped_steps;
    } else {
      pos_.epoch_loss_sum += r.loss;
      ++pos_.epoch_loss_steps;
    }
  }

  // Validates the finished epoch pos_.epoch and checkpoints the start of the next one.
  void end_epoch(const Stopwatch& epoch_clock, int64_t epoch_images, int64_t bpe,
                 TrainSummary& summary) {
    const EpochLog log = validate(epoch_clock, epoch_images, bpe);
    summary.epochs_done = pos_.epoch + 1;
    if (observer_ && main_) observer_->on_epoch_end(log);
    pos_.epoch_offset = 0;
    pos_.batches_done = 0;
    pos_.samples_done = 0;
    pos_.epoch_loss_sum = 0;
    pos_.epoch_loss_steps = 0;
    pos_.epoch_skipped_steps = 0;
    RunPosition next_epoch = pos_;  // a resume from this checkpoint starts the next epoch
    ++next_epoch.epoch;
    summary.last_checkpoint = save_checkpoint(next_epoch, log.best);
    // A regroup that interrupted this epoch's validation: the validation done again, apart.
    if (regroup_clock_.running()) regroup_clock_.lap("epoch end");
  }

  // The summary's totals, once the last epoch is done.
  TrainSummary finish(TrainSummary summary, const TrainTotals& totals) {
    writer_->wait();  // the last checkpoint written (or its error thrown) before the run ends
    summary.steps = pos_.global_step;
    summary.best_mean_auroc = best_mean_auroc_;
    summary.best_checkpoint =
        best_mean_auroc_ ? (fs::path(store_->dir()) / "best.json").string() : "";
    summary.train_seconds = totals.seconds;
    summary.images_per_second =
        totals.seconds > 0 ? distributed::average_across_ranks(
                                 *ctx_, static_cast<double>(totals.images) / totals.seconds) *
                                 ctx_->world_size()
                           : 0;
    if (totals.steps > 0) summary.mean_step = totals.step_sum.scaled(1.0 / totals.steps);
    summary.bad_images = train_loader_->stats().bad_images + val_loader_->stats().bad_images;
    summary.empty_batch_steps = empty_batch_steps_;
    summary.non_finite_steps = non_finite_steps_;
    if (timeline_) timeline_->flush();
    return summary;
  }

  // --record-examples: this rank's dataset indices of the step the ranks agreed to train.
  void record_step_examples(const data::Batch& batch) const {
    std::ofstream out(fmt::format("{}.rank{}", opt_.record_examples, ctx_->rank()), std::ios::app);
    out << opt_.membership_round << ' ' << pos_.epoch << ' ' << pos_.global_step;
    for (int64_t index : batch.indices)
      out << ' ' << index;
    out << '\n';
  }

  // One training step; a skipped one on every rank when the batch of some rank lost every image
  // (its loss would be NaN, and the others would wait for it in the gradient allreduce); or
  // nullopt on every rank when a stop was requested on any (stop_signal_ set); or DistError on
  // every rank when the elastic round ended on any (--elastic in-place: they regroup). Deciding
  // together costs one small allreduce per step with several workers, none with one. The data
  // position moves on after a step, skipped or not; a skipped step leaves the weights untouched.
  std::optional<StepResult> run_step(const data::Batch& batch) {
    const int stop_here = opt_.stop_request ? opt_.stop_request->load() : 0;
    const distributed::ElasticRound* round = ctx_->elastic_round();
    std::vector<double> flags{batch.indices.empty() ? 1.0 : 0.0, stop_here != 0 ? 1.0 : 0.0,
                              static_cast<double>(stop_here),
                              round != nullptr && round->ended() ? 1.0 : 0.0};
    if (ctx_->world_size() > 1) {
      flags = distributed::average_across_ranks(*ctx_, flags);
      for (double& sum : flags)
        sum *= static_cast<double>(ctx_->world_size());
    }
    const auto empty_ranks = std::lround(flags[0]);
    const auto stop_ranks = std::lround(flags[1]);
    if (stop_ranks > 0) {
      // The signal every asking rank got, or 0 when they differ.
      const auto signal_sum = std::lround(flags[2]);
      stop_signal_ = signal_sum % stop_ranks == 0 ? static_cast<int>(signal_sum / stop_ranks) : 0;
      return std::nullopt;
    }
    if (std::lround(flags[3]) > 0) {
      // Every rank leaves before this step, with the same weights: no step is lost.
      throw DistError(fmt::format("round {} ended before step {}", opt_.membership_round,
                                  pos_.global_step + 1));
    }
    // Before the gradient allreduce: a step that some rank applies counts every rank's batch,
    // also that of a rank which fails or dies after sending its gradients.
    if (!opt_.record_examples.empty()) record_step_examples(batch);
    if (empty_ranks > 0) {
      if (main_) {
        log::warn(
            "step {}: every image of the batch failed to decode on {} of {} workers: step "
            "skipped on every worker",
            pos_.global_step, empty_ranks, ctx_->world_size());
      }
      ++empty_batch_steps_;
      StepResult r;
      r.skipped = true;
      return r;
    }
    // The checkpoint taken before this step is on disk before the step's update (rank 0's
    // writer): a crash costs at most --checkpoint-every steps, and the step waits only for the
    // part of the write that outlasts its forward and backward (counted in its optimizer time).
    StepResult r = step_->run(batch, pos_.global_step, [this] { writer_->wait(); });
    if (r.skipped) ++non_finite_steps_;
    return r;
  }

  // The loader's wait ended when the step began (`start_us`), so the phases start before it.
  void record_timeline(int64_t start_us, const StepTimes& t) {
    if (!timeline_) return;
    record_step_phases(*timeline_, pos_.global_step,
                       start_us - static_cast<int64_t>(t.data_wait * 1e6), t);
  }

  void log_step(Window& w, double lr, int64_t bpe) {
    // Collective: every rank logs at the same steps.
    const auto avg = distributed::average_across_ranks(
        *ctx_, {w.loss_sum, static_cast<double>(w.loss_steps), static_cast<double>(w.images)});
    StepLog log;
    log.step = pos_.global_step;
    log.epoch = pos_.epoch;
    log.batch_in_epoch = pos_.batches_done;
    log.batches_per_epoch = bpe;
    if (avg[1] > 0) log.loss = avg[0] / avg[1];
    log.skipped_steps = w.skipped;  // equal on every rank: skips are decided together
    log.lr = lr;
    log.images_per_second = avg[2] * ctx_->world_size() / std::max(1e-9, w.clock.seconds());
    log.times = w.times.scaled(1.0 / static_cast<double>(w.steps));
    w = Window();
    if (!main_) return;
    nlohmann::json record{{"type", "step"},
                          {"step", log.step},
                          {"epoch", log.epoch},
                          {"batch", log.batch_in_epoch},
                          {"loss", optional_json(log.loss)},
                          {"skipped_steps", log.skipped_steps},
                          {"lr", log.lr},
                          {"images_per_second", log.images_per_second},
                          {"step_s", log.times.total}};
    for (const StepPhase& p : kStepPhases)
      record[std::string(p.name) + "_s"] = log.times.*p.seconds;
    metrics_->append(record);
    if (observer_) observer_->on_step(log);
  }

  EpochLog validate(const Stopwatch& epoch_clock, int64_t epoch_images, int64_t bpe) {
    EpochLog log;
    log.epoch = pos_.epoch;
    log.step = pos_.global_step;
    const auto loss = distributed::average_across_ranks(
        *ctx_, {pos_.epoch_loss_sum, static_cast<double>(pos_.epoch_loss_steps)});
    if (loss[1] > 0) log.train_loss = loss[0] / loss[1];
    log.skipped_steps = pos_.epoch_skipped_steps;
    log.images_per_second =
        distributed::average_across_ranks(*ctx_, static_cast<double>(epoch_images)) *
        ctx_->world_size() / std::max(1e-9, epoch_clock.seconds());
    // Rank 0's BatchNorm statistics are the checkpointed ones: validate with them everywhere.
    if (ctx_->world_size() > 1) distributed::broadcast_module(*ctx_, *model_);
    log::debug("epoch {}: validating", pos_.epoch);
    const EvalMetrics m = evaluate_outputs(validation_outputs(), loss_);
    log.val_loss = m.loss;
    log.val_auroc = m.auroc;
    log.lr_reduced = schedule_->observe_val_loss(m.loss);
    log.lr = schedule_->lr_at(pos_.epoch + 1.0);
    if (m.auroc.mean && (!best_mean_auroc_ || *m.auroc.mean > *best_mean_auroc_)) {
      best_mean_auroc_ = m.auroc.mean;
      log.best = true;
    }
    log.seconds = epoch_clock.seconds();
    if (main_) {
      metrics_->append({{"type", "epoch"},
                        {"epoch", log.epoch},
                        {"step", log.step},
                        {"train_loss", optional_json(log.train_loss)},
                        {"skipped_steps", log.skipped_steps},
                        {"val_loss", log.val_loss},
                        {"val_examples", m.examples},
                        {"val_auroc", auroc_json(m.auroc)},
                        {"lr_next", log.lr},
                        {"lr_reduced", log.lr_reduced},
                        {"best", log.best},
                        {"seconds", log.seconds},
                        {"images_per_second", log.images_per_second}});
    }
    return log;
  }

  // The validation's outputs for the epoch. Under --elastic in-place the rows this rank computed
  // are kept when a regroup interrupts the pass, and the next round's pass goes on from every
  // rank's kept rows when it validates the same epoch with the same model (a digest of the
  // parameters and buffers it validates with, rank 0's): a lost or a new node costs only the
  // examples that no survivor had reached.
  SplitOutputs validation_outputs() {
    if (ctx_->elastic_round() == nullptr) {
      return predict_split(*model_, *val_loader_, ctx_.get(), device_);
    }
    const uint64_t digest = state_digest(models::state_dict(*model_), {{"epoch", pos_.epoch}});
    if (kept_validation_.model_digest != digest) kept_validation_ = {digest, {}};
    SplitOutputs outputs = predict_split(*model_, *val_loader_, ctx_.get(), device_,
                                         abandon_if_round_ended(), &kept_validation_.rows);
    kept_validation_ = {};
    return outputs;
  }

  // --elastic in-place: a validation's check before each batch. When the round has ended (a
  // node joins or is lost) the rank leaves at once with DistError (before the validation's
  // collectives) instead of finishing a pass that the others, or the newcomer, would wait for;
  // the position still ends the epoch, so the next round's validation of it goes on from the rows
  // the ranks kept. Logs each batch at debug level. Empty otherwise.
  std::function<void()> abandon_if_round_ended() const {
    const distributed::ElasticRound* round = ctx_->elastic_round();
    if (round == nullptr) return {};
    return [round, epoch = pos_.epoch, batch = int64_t{0}]() mutable {
      log::debug("epoch {}: validating batch {}", epoch, batch++);
      if (round->ended()) {
        throw DistError(
            fmt::format("round {} ended during the validation of epoch {}", round->round(), epoch));
      }
    };
  }

  nlohmann::json state_json(const RunPosition& position) const {
    RunState s;
    s.position = position;
    s.world_size = position_world_size_;
    s.batch_size = opt_.data.batch_size;
    s.plateau = schedule_->state();
    s.best_mean_auroc = best_mean_auroc_;
    s.model = opt_.model;
    s.image_size = opt_.data.image_size;
    s.crop_size = opt_.data.crop_size;
    s.label_names = train_loader_->label_names();
    return run_state_json(s);
  }

  // About the size of this rank's checkpoint file: its tensors and 1 MiB for the header (a
  // larger one, with PowerSGD's residuals, grows the buffer at its first save).
  size_t checkpoint_bytes() const {
    return static_cast<size_t>(
               tensor_bytes(run_checkpoint_tensors(*model_, *optimizer_, params_))) +
           (size_t{1} << 20);
  }

  // Rank 0: a checkpoint from which a resume continues at `position`, copied here and written
  // on the writer's thread while training goes on (returns its manifest's path).
  // Every rank calls it: PowerSGD's residuals of every rank travel to rank 0.
  std::string save_checkpoint(const RunPosition& position, bool best) {
    const auto compression = reducer_ ? reducer_->compression_state() : std::nullopt;
    if (!main_) return "";
    auto tensors = run_checkpoint_tensors(*model_, *optimizer_, params_);
    nlohmann::json state = state_json(position);
    add_loss_scaler_state(state, step_->loss_scaler());
    if (compression) add_compression_state(state, tensors, *compression);
    return writer_->save(position.global_step, best, std::move(state), tensors);
  }

  // Rank 0: the checkpoint named by --resume, verified (nullopt: start fresh).
  std::optional<Checkpoint> find_checkpoint() const {
    if (opt_.resume.kind == ResumeFrom::Kind::kLatest) return store_->load_latest();
    if (opt_.resume.kind == ResumeFrom::Kind::kManifest)
      return read_checkpoint(opt_.resume.manifest);
    if (!store_->list().empty()) {
      throw UsageError(store_->dir() + " already holds checkpoints: pass `resume` auto to " +
                       "continue that run, or choose another `out_dir`");
    }
    return std::nullopt;
  }

  // Loads the checkpoint named by --resume; returns its step, or -1 when starting fresh. Only
  // rank 0 reads the run directory; the others receive the checkpoint from it.
  int64_t resume() {
    const std::optional<Checkpoint> ckpt =
        share_checkpoint(*ctx_, 0, [this] { return find_checkpoint(); });
    holds_state_ = true;
    position_world_size_ = ctx_->world_size();
    if (!ckpt) return -1;
    restore_from(*ckpt);
    log::info("resumed from {} (epoch {}, step {})", ckpt->path, pos_.epoch, pos_.global_step);
    return pos_.global_step;
  }

  // Puts a checkpoint's training state in place, laid out for this world size; `which` of its
  // tensors are copied into the live ones (kRngOnly: the rest are this rank's own memory).
  void restore_from(const Checkpoint& c, RestoreTensors which = RestoreTensors::kAll) {
    const Checkpoint* ckpt = &c;
    const RunState s = parse_run_state(ckpt->state, ckpt->path);
    if (s.model.arch != opt_.model.arch) {
      throw UsageError(
          fmt::format("{} is a {} checkpoint, not {}", ckpt->path, s.model.arch, opt_.model.arch));
    }
    if (s.label_names != train_loader_->label_names()) {
      throw UsageError(fmt::format("{} was trained on other labels ({}) than the data's ({})",
                                   ckpt->path, fmt::join(s.label_names, ", "),
                                   fmt::join(train_loader_->label_names(), ", ")));
    }
    restore_run_checkpoint(*ckpt, *model_, *optimizer_, params_, step_->loss_scaler(), which);
    schedule_ = std::make_unique<LrSchedule>(opt_.schedule, s.plateau);
    best_mean_auroc_ = s.best_mean_auroc;
    // From the next epoch on, a new layout's order is its own.
    pos_ =
        resume_position(s, ctx_->world_size(), opt_.data.batch_size, train_loader_->dataset_size());
    if (reducer_) {
      if (const auto compression = compression_state_of(*ckpt)) {
        reducer_->restore_compression_state(*compression);
      } else if (ctx_->elastic_round()) {
        // A state from memory (or a checkpoint written alone) carries no PowerSGD state: a
        // regroup changes the world, so the warm start and the error feedback restart (a failed
        // step may have changed them on some ranks only), and the steps that count towards
        // `powersgd_start_step` are the run's.
        distributed::CompressionState from_run;
        from_run.steps = pos_.global_step;
        reducer_->restore_compression_state(from_run);
      }
    }
    position_world_size_ = ctx_->world_size();
    holds_state_ = true;
  }

  TrainerOptions opt_;
  std::shared_ptr<distributed::DistContext> ctx_;
  TrainerObserver* observer_;
  torch::Device device_{torch::kCPU};
  bool main_ = true;
  models::Classifier model_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<data::Loader> train_loader_;
  std::unique_ptr<data::Loader> val_loader_;
  BceWithLogitsLoss loss_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<TimelineWriter> timeline_;
  std::unique_ptr<distributed::GradientReducer> reducer_;
  std::unique_ptr<TrainStep> step_;
  std::unique_ptr<CheckpointStore> store_;
  std::unique_ptr<CheckpointWriter> writer_;  // after store_: waits for its write before it goes
  std::unique_ptr<MetricsLog> metrics_;
  RunPosition pos_;
  std::optional<double> best_mean_auroc_;
  int64_t empty_batch_steps_ = 0;  // steps skipped by this process: a batch without images
  int64_t non_finite_steps_ = 0;   // steps skipped by this process: non-finite values
  int stop_signal_ = 0;            // the agreed stop request's signal (see run_step)
  // The world size pos_ is laid out for (a checkpoint records it).
  int position_world_size_ = 1;
  // --elastic in-place: this rank holds training state (false only in a newcomer until its
  // first round starts); the state kept through a regroup; reducers of failed groups.
  bool holds_state_ = false;
  std::optional<Checkpoint> held_;
  RegroupClock regroup_clock_;  // since this rank left round left_round_ (or was ready, new)
  // The rows of a validation a regroup interrupted, and the digest of the model that computed
  // them (see validation_outputs).
  struct KeptValidation {
    uint64_t model_digest = 0;
    PassRows rows;
  };
  KeptValidation kept_validation_;
  int left_round_ = -1;
  std::vector<std::unique_ptr<distributed::GradientReducer>> retired_reducers_;
};

Trainer::Trainer(TrainerOptions options, std::shared_ptr<distributed::DistContext> ctx,
                 TrainerObserver* observer)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(ctx), observer)) {}
Trainer::~Trainer() = default;
TrainSummary Trainer::run() {
  return impl_->run();
}
std::shared_ptr<distributed::DistContext> Trainer::context() const {
  return impl_->context();
}

}  // namespace chexscale::train
