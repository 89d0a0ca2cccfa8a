// Training-throughput benchmark (see throughput.h).
#include "measure/throughput.h"

#include <ATen/Parallel.h>

#include <vector>

#include "common/error.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/timeline.h"
#include "common/timer.h"
#include "data/loader.h"
#include "distributed/hierarchical_trial.h"
#include "distributed/reducer.h"
#include "measure/bench_document.h"
#include "models/registry.h"
#include "train/channels_last.h"
#include "train/optimizer.h"
#include "train/step.h"

namespace chexscale::measure {
namespace {

constexpr size_t kTimesPerStep = kStepPhases.size() + 1;  // phases and total, for all_gather
constexpr int64_t kResidentBatches = 4;  // synthetic batches kept on the device, as the peer

data::LoaderOptions loader_options(const ThroughputOptions& o,
                                   const distributed::DistContext& ctx) {
  data::LoaderOptions l;
  l.synthetic = o.data.empty();
  l.source = o.data;
  // Synthetic data: just the batches ResidentBatches keeps.
  l.synthetic_size =
      std::min(kResidentBatches, o.warmup_steps + o.steps) * o.batch_size * ctx.world_size();
  l.batch_size = o.batch_size;
  l.image_size = o.image_size;
  l.crop_size = o.image_size;
  l.threads = l.synthetic ? 1 : o.loader_threads;
  l.drop_last = true;
  l.seed = o.seed;
  l.rank = ctx.rank();
  l.world_size = ctx.world_size();
  l.pin_memory = ctx.device().is_cuda();
  return l;
}

// Where the benchmark's batches come from, and the seconds each took to arrive.
class BatchSource {
 public:
  virtual ~BatchSource() = default;
  virtual std::pair<data::Batch, double> next() = 0;
};

// A data set through the loader, starting the next epoch when one ends: the input pipeline is
// part of what is measured (data_wait).
class LoaderBatches : public BatchSource {
 public:
  explicit LoaderBatches(const data::LoaderOptions& options) : loader_(options) {
    CHX_CHECK(loader_.batches_per_epoch() > 0, "the data set has no full batch for this rank");
    loader_.start_epoch(epoch_);
  }

  std::pair<data::Batch, double> next() override {
    Stopwatch wait;
    std::optional<data::Batch> batch = loader_.next();
    if (!batch) {
      loader_.start_epoch(++epoch_);
      batch = loader_.next();
      CHX_CHECK(batch.has_value(), "epoch {} has no batches", epoch_);
    }
    return {std::move(*batch), wait.seconds()};
  }

 private:
  data::Loader loader_;
  int64_t epoch_ = 0;
};

// Synthetic batches made once and kept on the device (in channels-last with --channels-last),
// used in turn, as the PyTorch peer does: no generation, host-to-device copy or layout change per
// step, so the benchmark times the engine's compute and communication alone (data_wait 0).
class ResidentBatches : public BatchSource {
 public:
  ResidentBatches(const data::LoaderOptions& options, int64_t count, torch::Device device,
                  bool channels_last) {
    LoaderBatches loader(options);
    for (int64_t i = 0; i < count; ++i) {
      data::Batch batch = loader.next().first;
      batch.images = batch.images.to(device);
      if (channels_last) batch.images = train::to_channels_last(batch.images);
      batch.labels = batch.labels.to(device);
      batches_.push_back(std::move(batch));
    }
  }

  std::pair<data::Batch, double> next() override {
    return {batches_[next_++ % batches_.size()], 0.0};
  }

 private:
  std::vector<data::Batch> batches_;
  size_t next_ = 0;
};

std::unique_ptr<BatchSource> make_batch_source(const ThroughputOptions& o,
                                               const distributed::DistContext& ctx) {
  const data::LoaderOptions loader = loader_options(o, ctx);
  if (!loader.synthetic) return std::make_unique<LoaderBatches>(loader);
  return std::make_unique<ResidentBatches>(
      loader, std::min(kResidentBatches, o.warmup_steps + o.steps), ctx.device(), o.channels_last);
}

std::vector<RankMeasurement> gather_measurements(distributed::DistContext& ctx, double elapsed,
                                                 const std::vector<StepTimes>& steps) {
  std::vector<double> packed{elapsed};
  for (const auto& t : steps) {
    for (const StepPhase& p : kStepPhases)
      packed.push_back(t.*p.seconds);
    packed.push_back(t.total);
  }
  const torch::Tensor all =
      ctx.all_gather(torch::tensor(packed, torch::kFloat64)).reshape({ctx.world_size(), -1});
  std::vector<RankMeasurement> ranks(ctx.world_size());
  for (int r = 0; r < ctx.world_size(); ++r) {
    const torch::Tensor row = all[r].contiguous();
    const double* v = row.data_ptr<double>();
    ranks[r].elapsed_s = v[0];
    for (size_t i = 0; i < steps.size(); ++i) {
      const double* f = v + 1 + i * kTimesPerStep;
      StepTimes t;
      for (const StepPhase& p : kStepPhases)
        t.*p.seconds = *f++;
      t.total = *f;
      ranks[r].steps.push_back(t);
    }
  }
  return ranks;
}

}  // namespace

void ThroughputOptions::validate() const {
  if (steps < 1) throw UsageError(fmt::format("steps {} must be >= 1", steps));
  if (warmup_steps < 0) {
    throw UsageError(fmt::format("warmup_steps {} must be >= 0", warmup_steps));
  }
  if (batch_size < 1) throw UsageError(fmt::format("batch_size {} must be >= 1", batch_size));
  if (image_size < 16) throw UsageError(fmt::format("image_size {} must be >= 16", image_size));
  models::check_input_side(arch, image_size, "image_size");
  if (threads < 1 || threads > kMaxThreads) {
    throw UsageError(fmt::format("threads {} is not in [1, {}]", threads, kMaxThreads));
  }
  if (loader_threads < 1 || loader_threads > kMaxThreads) {
    throw UsageError(
        fmt::format("loader_threads {} is not in [1, {}]", loader_threads, kMaxThreads));
  }
  reducer.validate();
}

struct ThroughputJob::State {
  std::shared_ptr<distributed::DistContext> ctx;
  ThroughputOptions options;
  models::Classifier model{nullptr};
  std::unique_ptr<torch::optim::Optimizer> optimizer;
  std::unique_ptr<BatchSource> batches;
  int64_t steps_run = 0;  // over every run: the step index the training step is given
};

ThroughputJob::ThroughputJob(std::shared_ptr<distributed::DistContext> ctx,
                             const ThroughputOptions& options)
    : state_(std::make_unique<State>()) {
  options.validate();
  train::check_amp_supported(options.amp, ctx->device());
  at::set_num_threads(options.threads);
  torch::manual_seed(static_cast<uint64_t>(options.seed));
  State& s = *state_;
  s.ctx = std::move(ctx);
  s.options = options;
  models::ModelOptions model_options;
  model_options.arch = options.arch;
  s.model = models::make_model(model_options);
  s.model->to(s.ctx->device());
  distributed::broadcast_module(*s.ctx, *s.model);
  // The training recipe's optimizer (FusedAdam), as `chexscale train` builds it.
  train::OptimizerOptions optimizer_options;
  optimizer_options.lr = train::kDefaultLearningRate;  // irrelevant to speed
  s.optimizer = train::make_optimizer(s.model->parameters(), optimizer_options);
  s.batches = make_batch_source(options, *s.ctx);
}

ThroughputJob::~ThroughputJob() = default;

namespace {

// A gradient hook on a parameter, to remove after the run.
using ReadyHook = std::pair<torch::Tensor, unsigned>;

// Records each parameter's size and shape in `log` and hooks it so that its gradient's ready
// time lands in ready_now[i] (which must outlive the hooks).
std::vector<ReadyHook> add_ready_hooks(const distributed::DistContext& ctx,
                                       const std::vector<torch::Tensor>& params,
                                       GradientReadyLog& log, std::vector<int64_t>& ready_now) {
  CHX_CHECK(ctx.world_size() == 1, "gradient-ready times are profiled on one worker, not {}",
            ctx.world_size());
  std::vector<ReadyHook> hooks;
  ready_now.assign(params.size(), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    log.parameter_bytes.push_back(params[i].numel() *
                                  static_cast<int64_t>(params[i].element_size()));
    log.parameter_shapes.push_back(params[i].sizes().vec());
    hooks.emplace_back(params[i], params[i].register_hook([&ready_now, i](const torch::Tensor&) {
      ready_now[i] = now_micros();
    }));
  }
  return hooks;
}

// The warm-up steps a run on `ctx` takes for `requested`: under --hierarchical=auto at least the
// trial's, so that the timed steps run the path the trial chose, not the trial's own.
int64_t warmup_steps_on(const distributed::DistContext& ctx, int64_t requested) {
  if (!ctx.hierarchical_auto() || requested >= distributed::HierarchicalTrial::kSteps)
    return requested;
  if (ctx.is_main()) {
    log::info("--hierarchical=auto: warm-up raised from {} to {} steps, the trial of both paths",
              requested, distributed::HierarchicalTrial::kSteps);
  }
  return distributed::HierarchicalTrial::kSteps;
}

// What a run of `options` on `ctx` was, for its bench.json.
report::BenchConfig bench_config(const ThroughputOptions& options,
                                 const distributed::DistContext& ctx, int64_t warmup_steps,
                                 int64_t steps) {
  report::BenchConfig config;
  config.label = options.label;
  config.arch = options.arch;
  config.image_size = options.image_size;
  config.batch_per_worker = options.batch_size;
  config.world_size = ctx.world_size();
  config.nnodes = std::max(1, ctx.world_size() / std::max(1, ctx.local_world_size()));
  config.backend = ctx.backend();
  config.hierarchical = ctx.hierarchical();
  config.hierarchical_auto = ctx.hierarchical_auto();
  config.overlap = options.reducer.overlap;
  config.compression = distributed::compression_spec(options.reducer);
  config.bucket_mb = options.reducer.bucket_mb;
  config.data = options.data.empty() ? "synthetic" : options.data;
  config.threads_per_worker = options.threads;
  config.device = ctx.device().is_cuda() ? "cuda" : "cpu";
  config.amp = train::to_string(options.amp);
  config.channels_last = options.channels_last;
  config.warmup_steps = warmup_steps;
  config.steps = steps;
  return config;
}

}  // namespace

report::BenchResult ThroughputJob::run(const distributed::ReducerOptions& reducer_options,
                                       int64_t warmup_steps, int64_t steps,
                                       TimelineWriter* timeline, const StepProgress& progress,
                                       GradientReadyLog* ready_log) {
  State& s = *state_;
  ThroughputOptions options = s.options;
  distributed::DistContext& ctx = *s.ctx;
  warmup_steps = warmup_steps_on(ctx, warmup_steps);
  options.reducer = reducer_options;
  options.warmup_steps = warmup_steps;
  options.steps = steps;
  options.validate();
  std::unique_ptr<distributed::GradientReducer> reducer;
  if (ctx.world_size() > 1) {
    reducer = std::make_unique<distributed::GradientReducer>(s.ctx, s.model->parameters(),
                                                             options.reducer, timeline);
  }
  train::TrainStepOptions step_options;
  step_options.non_finite = train::NonFinitePolicy::kIgnore;
  step_options.device = ctx.device();
  step_options.amp = options.amp;
  step_options.channels_last = options.channels_last;
  train::TrainStep step(s.model, *s.optimizer, train::BceWithLogitsLoss(), reducer.get(),
                        step_options);
  std::vector<int64_t> ready_now;      // the current step's gradient-ready times (ready_log only)
  std::vector<ReadyHook> ready_hooks;  // removed after the run
  if (ready_log != nullptr)
    ready_hooks = add_ready_hooks(ctx, s.model->parameters(), *ready_log, ready_now);

  const int64_t total_steps = warmup_steps + steps;
  std::vector<StepTimes> timed;
  timed.reserve(static_cast<size_t>(steps));
  Stopwatch elapsed;
  for (int64_t i = 0; i < total_steps; ++i) {
    if (i == warmup_steps) {
      ctx.barrier();  // every rank starts the timed steps together
      elapsed.reset();
    }
    const int64_t wait_start_us = now_micros();
    auto [batch, wait_s] = s.batches->next();
    std::fill(ready_now.begin(), ready_now.end(), 0);
    const int64_t step_start_us = now_micros();
    StepTimes t = step.run(batch, s.steps_run++).times;
    t.data_wait = wait_s;
    t.total += wait_s;
    if (ready_log != nullptr && i >= warmup_steps) {
      ready_log->backward_start_us.push_back(step_start_us + static_cast<int64_t>(t.forward * 1e6));
      ready_log->ready_us.push_back(ready_now);
      ready_log->step_seconds.push_back(t.total);
    }
    if (timeline != nullptr) record_step_phases(*timeline, i, wait_start_us, t);
    if (i >= warmup_steps) timed.push_back(t);
    if (progress) progress(i + 1, total_steps, t.total);
  }
  const double elapsed_s = elapsed.seconds();
  for (auto& [param, hook] : ready_hooks)
    param.remove_hook(hook);

  report::BenchConfig config = bench_config(options, ctx, warmup_steps, steps);
  config.shared_memory = reducer && reducer->shared_memory();
  return bench_document(config, gather_measurements(ctx, elapsed_s, timed));
}

report::BenchResult run_throughput(const std::shared_ptr<distributed::DistContext>& ctx,
                                   const ThroughputOptions& options, TimelineWriter* timeline,
                                   const StepProgress& progress, GradientReadyLog* ready_log) {
  ThroughputJob job(ctx, options);
  return job.run(options.reducer, options.warmup_steps, options.steps, timeline, progress,
                 ready_log);
}

}  // namespace chexscale::measure
