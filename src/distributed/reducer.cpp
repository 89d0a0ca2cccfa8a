// GradientReducer: flat bucket buffers allocated once, filled from autograd post-hooks on each
// parameter's gradient accumulator, reduced by asynchronous allreduces launched in bucket order.
//
// Why post-hooks on the accumulator (DDP's choice) rather than tensor.register_hook: a tensor
// hook runs before the gradient is accumulated into .grad(), so the bucket would miss what was
// already there; the accumulator's post-hook runs once .grad() is final for this backward.
//
// Gradients are bucket slots (DDP's gradient_as_bucket_view): after backward each parameter's
// .grad() is its slot of the bucket that was allreduced and averaged in place, so nothing is
// copied out. Steps release their gradients (zero_grad(set_to_none)), so autograd makes fresh
// ones, and the post-hook copies each into its slot while it is in cache and re-points .grad():
// one pass, where zeroing the slots and letting autograd add into them makes three. PowerSGD's
// first sweep reads a compressed matrix's fresh gradient where it is instead (project_early), so
// that slot is only written by the approximation. A gradient already in its slot (a caller that
// zeroed it in place) is added into as before. A slot shares the bucket's storage but is not an
// autograd view, so an optimizer may still detach_() and zero_() it.
//
// PowerSGD (powersgd.h) makes two allreduces of a bucket, the second computed from the first's
// result. The order of collectives must be the same on every rank, so it is fixed: when bucket b
// starts, its first allreduce is issued, then the second of every earlier bucket still waiting
// for it (normally b - 1, whose first allreduce has had b's backward to finish); finish() issues
// the rest. The sequence is P0, P1, Q0, P2, Q1, ..., Q(last) everywhere.
#include "distributed/reducer.h"

#include <c10/util/Exception.h>
#include <c10/util/strides.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <functional>
#include <mutex>

#include "common/enum_parse.h"
#include "common/error.h"
#include "common/huge_pages.h"
#include "common/log.h"
#include "common/timeline.h"
#include "common/timer.h"
#include "distributed/bucket_plan.h"
#include "distributed/hierarchical_trial.h"
#include "distributed/powersgd.h"
#include "distributed/shared_memory_allreduce.h"
#include "distributed/watchdog.h"

namespace chexscale::distributed {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// Why a rank of a job that spans nodes cannot share memory with every other rank.
constexpr const char* kOnOtherNodes = "ranks on other nodes";

struct Bucket {
  std::vector<size_t> params;        // indices into the reducer's parameter list
  torch::Tensor flat;                // the gradients, back to back, in the parameters' dtype
  torch::Tensor wire;                // the compressed payload (fp16/bf16); undefined without
  std::vector<torch::Tensor> slots;  // each parameter's gradient, stored inside `flat`
  size_t pending = 0;                // parameters whose gradient is not in `flat` yet
  c10::intrusive_ptr<c10d::Work> work;
  bool averaged = false;  // the allreduce in flight divides by the world size itself
  uint64_t seq = 0;
  // PowerSGD: the bucket's compression state (null when it compresses nothing), and where this
  // step stands: the first or second allreduce in flight, or done.
  std::unique_ptr<PowerSgdBucket> powersgd;
  enum class Stage { kPlain, kFirst, kSecond, kDone } stage = Stage::kPlain;
};

// Whether gradients of `type` can be compressed or put in shared memory: float32 and float64.
bool is_float(c10::ScalarType type) {
  return type == torch::kFloat || type == torch::kDouble;
}

c10::ScalarType wire_type(Compression compression) {
  switch (compression) {
    case Compression::kFp16:
      return torch::kHalf;
    case Compression::kBf16:
      return torch::kBFloat16;
    case Compression::kNone:
    case Compression::kPowerSgd:
      break;
  }
  return torch::kFloat;
}

}  // namespace

class GradientReducer::Impl {
 public:
  Impl(std::shared_ptr<DistContext> ctx, std::vector<torch::Tensor> parameters,
       ReducerOptions options, TimelineWriter* timeline);
  ~Impl();
  void detach();

  void prepare_for_backward(double loss_scale);
  double finish();
  void on_gradient_ready(size_t index);
  size_t num_buckets() const { return buckets_.size(); }
  bool shared_memory() const { return shm_ != nullptr; }
  std::optional<CompressionState> compression_state();
  std::optional<CompressionState> common_compression_state() const;
  void restore_compression_state(const CompressionState& state);

 private:
  void build_powersgd();
  void launch_ready_buckets();
  void launch(size_t b);
  // Starts the allreduce of `payload` for bucket b (watchdog sequence, timeline).
  void start_allreduce(size_t b, const torch::Tensor& payload, const char* what);
  void wait(size_t b, const char* what);
  // PowerSGD: issues the second allreduce of every bucket before `end` still waiting for it.
  void advance_before(size_t end);
  // Makes .grad() of parameter `index` its bucket slot, keeping the gradient's value.
  void attach_slot(size_t index);
  // PowerSGD steps: hands autograd's gradient of a compressed matrix to the bucket's first sweep
  // while it is in cache, and makes .grad() the slot that finish() fills; false for a gradient
  // that must be copied into its slot instead.
  bool project_early(size_t index);
  bool grad_in_slot(size_t index) const;
  void check_wire_type_supported();
  // Whether a bucket of `type` lives in shared memory when the job has it: float buckets whose
  // own values are allreduced (not a compressed copy).
  bool in_shared_memory(c10::ScalarType type) const;
  // Collective: shm_ for the buckets of `plan` that live in shared memory, when every rank is on
  // one node (Gloo, CPU, not --elastic in-place) and the segment can be made; else shm_ stays
  // null (a log line says why when it could not be made).
  void make_shared_memory(const std::vector<std::vector<size_t>>& plan);
  // The elements of the parameters `members`.
  int64_t numel_of(const std::vector<size_t>& members) const;
  // --hierarchical=auto: records this step's time and, after the trial's last step, decides.
  void advance_trial();

  std::shared_ptr<DistContext> ctx_;
  std::vector<torch::Tensor> params_;
  ReducerOptions options_;
  TimelineWriter* timeline_;
  bool compress_ = false;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<size_t, size_t>> slot_;  // parameter -> (bucket, position in bucket)
  std::vector<char> ready_;
  size_t next_launch_ = 0;
  size_t next_advance_ = 0;  // PowerSGD: the first bucket whose second allreduce is not issued
  int64_t steps_ = 0;        // finish() calls so far
  bool low_rank_ = false;    // this step compresses with PowerSGD
  double loss_scale_ = 1.0;
  bool prepared_ = false;                   // between prepare_for_backward() and finish()
  std::optional<HierarchicalTrial> trial_;  // --hierarchical=auto on nodes of several ranks
  Stopwatch step_watch_;                    // from prepare_for_backward(), for the trial
  bool armed_ = false;                      // hooks fill buckets (overlap on, world > 1)
  std::mutex mutex_;                        // hooks may run on autograd worker threads (GPU)
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  // The buckets' allreduce through node shared memory, when every rank is on one node.
  std::unique_ptr<SharedMemoryAllreduce> shm_;
};

namespace {

// Calls back when a parameter's gradient is final for this backward.
class GradientReadyHook : public torch::autograd::FunctionPostHook {
 public:
  explicit GradientReadyHook(std::function<void()> ready) : ready_(std::move(ready)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    ready_();
    return outputs;
  }

 private:
  std::function<void()> ready_;
};

}  // namespace

const char* to_string(Compression compression) {
  switch (compression) {
    case Compression::kNone:
      return "none";
    case Compression::kFp16:
      return "fp16";
    case Compression::kBf16:
      return "bf16";
    case Compression::kPowerSgd:
      return "powersgd";
  }
  throw Error("unknown Compression value");
}

Compression parse_compression(std::string_view text) {
  return parse_enum(
      text, "compression",
      {Compression::kNone, Compression::kFp16, Compression::kBf16, Compression::kPowerSgd});
}

void set_compression(ReducerOptions& options, std::string_view text) {
  const size_t colon = text.find(':');
  const Compression compression = parse_compression(text.substr(0, colon));
  if (colon == std::string_view::npos) {
    options.compression = compression;
    return;
  }
  const std::string rank(text.substr(colon + 1));
  size_t used = 0;
  int value = 0;
  try {
    value = std::stoi(rank, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (compression != Compression::kPowerSgd || used == 0 || used != rank.size() || value < 1) {
    throw UsageError(fmt::format(
        "compression '{}': only powersgd takes a rank, as powersgd:RANK with RANK an integer >= 1",
        text));
  }
  options.compression = compression;
  options.powersgd_rank = value;
}

std::string compression_spec(const ReducerOptions& options) {
  if (options.compression != Compression::kPowerSgd) return to_string(options.compression);
  return fmt::format("powersgd:{}", options.powersgd_rank);
}

void ReducerOptions::validate() const {
  check_bucket_sizes(bucket_mb, first_bucket_mb);
  if (powersgd_rank < 1) {
    throw UsageError(fmt::format("compression powersgd:{}: the rank must be >= 1", powersgd_rank));
  }
  if (powersgd_start_step < 0) {
    throw UsageError(fmt::format("powersgd_start_step {} must be >= 0", powersgd_start_step));
  }
  check_powersgd_min_rate(powersgd_min_rate);
}

GradientReducer::Impl::Impl(std::shared_ptr<DistContext> ctx, std::vector<torch::Tensor> parameters,
                            ReducerOptions options, TimelineWriter* timeline)
    : ctx_(std::move(ctx)), options_(std::move(options)), timeline_(timeline) {
  options_.validate();
  if (ctx_->hierarchical_auto()) trial_.emplace();
  const c10::ScalarType wire = wire_type(options_.compression);
  for (auto& p : parameters) {
    if (p.requires_grad()) params_.push_back(p);
  }
  const double first_mb = std::min(options_.first_bucket_mb, options_.bucket_mb);
  const auto plan = plan_buckets(params_, static_cast<int64_t>(first_mb * kMiB),
                                 static_cast<int64_t>(options_.bucket_mb * kMiB));
  slot_.resize(params_.size());
  ready_.assign(params_.size(), 0);
  if (ctx_->world_size() > 1 && options_.shared_memory) make_shared_memory(plan);
  torch::NoGradGuard no_grad;
  for (const auto& members : plan) {
    Bucket bucket;
    bucket.params = members;
    const int64_t numel = numel_of(members);
    const torch::Tensor& head = params_[members.front()];
    bucket.flat = shm_ && in_shared_memory(head.scalar_type())
                      ? shm_->allocate(numel, head.scalar_type())
                      : zeros_on_huge_pages(numel, head.options().requires_grad(false));
    if (wire != torch::kFloat && is_float(head.scalar_type())) {
      bucket.wire = zeros_on_huge_pages(numel, bucket.flat.options().dtype(wire));
      compress_ = true;
    }
    int64_t offset = 0;
    for (size_t k = 0; k < members.size(); ++k) {
      const torch::Tensor& p = params_[members[k]];
      // Same strides as the parameter (e.g. channels-last) when it is dense, so autograd adds
      // into the slot without a layout change.
      const c10::DimVector strides = p.is_non_overlapping_and_dense()
                                         ? c10::DimVector(p.strides())
                                         : c10::contiguous_strides(p.sizes());
      torch::Tensor slot = torch::empty({0}, bucket.flat.options());
      slot.set_(bucket.flat.storage(), offset, p.sizes(), strides);
      bucket.slots.push_back(std::move(slot));
      offset += p.numel();
      slot_[members[k]] = {buckets_.size(), k};
    }
    bucket.pending = members.size();
    buckets_.push_back(std::move(bucket));
  }
  if (ctx_->world_size() == 1) return;
  if (compress_) check_wire_type_supported();
  if (options_.compression == Compression::kPowerSgd) build_powersgd();
  for (size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i]);
    CHX_CHECK(accumulator != nullptr, "parameter {} is not a leaf tensor", i);
    hook_keys_.push_back(accumulator->add_post_hook(
        std::make_unique<GradientReadyHook>([this, i] { on_gradient_ready(i); })));
    accumulators_.push_back(std::move(accumulator));
  }
}

GradientReducer::Impl::~Impl() {
  detach();
}

void GradientReducer::Impl::detach() {
  for (size_t i = 0; i < accumulators_.size(); ++i)
    accumulators_[i]->del_post_hook(hook_keys_[i]);
  accumulators_.clear();
  hook_keys_.clear();
}

// Gloo in LibTorch 1.13 cannot sum bfloat16: each rank's allreduce fails locally, before any
// byte moves, so the probe is safe everywhere and the answer is a usage error, not a hang.
void GradientReducer::Impl::check_wire_type_supported() {
  std::vector<torch::Tensor> probe{torch::zeros({1}, buckets_.front().wire.options())};
  ctx_->watchdog()->begin();  // keeps the collective numbering equal on every rank
  try {
    ctx_->process_group()->allreduce(probe)->wait(ctx_->watchdog()->timeout());
  } catch (const c10::Error& e) {
    const char* compression = to_string(options_.compression);
    throw UsageError(fmt::format(
        "compression {}: the {} backend of this LibTorch ({}) cannot allreduce {} tensors ({}); "
        "use fp16",
        compression, ctx_->backend(), compat::torch_version(), compression,
        e.what_without_backtrace()));
  }
}

bool GradientReducer::Impl::in_shared_memory(c10::ScalarType type) const {
  return is_float(type) && wire_type(options_.compression) == torch::kFloat;
}

int64_t GradientReducer::Impl::numel_of(const std::vector<size_t>& members) const {
  int64_t numel = 0;
  for (size_t i : members)
    numel += params_[i].numel();
  return numel;
}

void GradientReducer::Impl::make_shared_memory(const std::vector<std::vector<size_t>>& plan) {
  size_t bytes = 0;
  for (const auto& members : plan) {
    const c10::ScalarType type = params_[members.front()].scalar_type();
    if (in_shared_memory(type))
      bytes += SharedMemoryAllreduce::allocation_bytes(numel_of(members), type);
  }
  const bool gloo_on_cpu = std::string_view(ctx_->backend()) == "gloo" && ctx_->device().is_cpu();
  if (!gloo_on_cpu || ctx_->elastic_round() != nullptr || bytes == 0) return;  // alike everywhere
  const bool one_node = ctx_->local_world_size() == ctx_->world_size();
  const std::string key = fmt::format("shm/{}", ctx_->watchdog()->begin());
  std::string why_not;
  shm_ = SharedMemoryAllreduce::create(
      *ctx_->store(), key, ctx_->rank(), ctx_->world_size(), bytes, one_node,
      fmt::format("{}: {} of the job's {} ranks on its node", kOnOtherNodes,
                  ctx_->local_world_size(), ctx_->world_size()),
      ctx_->watchdog()->timeout(), &why_not);
  if (!ctx_->is_main()) return;
  if (shm_) {
    log::info(
        "gradient allreduce through node shared memory: the job's {} ranks on one node, "
        "{:.1f} MiB of buckets each",
        ctx_->world_size(), bytes / kMiB);
  } else if (why_not.find(kOnOtherNodes) == std::string::npos) {
    log::warn("gradient allreduce over {} instead of node shared memory: {}", ctx_->backend(),
              why_not);
  }
}

// One PowerSGD state per bucket of floating-point gradients that has a matrix worth compressing;
// the others are plain allreduces even with PowerSGD on.
void GradientReducer::Impl::build_powersgd() {
  PowerSgdOptions options;
  options.rank = options_.powersgd_rank;
  options.min_rate = options_.powersgd_min_rate;
  std::vector<std::vector<int64_t>> shapes;
  for (Bucket& bucket : buckets_) {
    const c10::ScalarType type = bucket.flat.scalar_type();
    if (!is_float(type)) continue;
    for (size_t i : bucket.params)
      shapes.push_back(params_[i].sizes().vec());
    bucket.powersgd = std::make_unique<PowerSgdBucket>(bucket.slots, bucket.params, options);
    if (!bucket.powersgd->compresses_any()) bucket.powersgd.reset();
  }
  if (!ctx_->is_main()) return;
  const PowerSgdVolume volume = powersgd_volume(shapes, options);
  log::info(
      "PowerSGD rank {} from step {}: {} of {} gradient elements compressed; {} elements sent per "
      "step instead of {} ({:.1f}x fewer)",
      options.rank, options_.powersgd_start_step, volume.compressed, volume.total, volume.sent,
      volume.total, volume.sent > 0 ? static_cast<double>(volume.total) / volume.sent : 0.0);
}

void GradientReducer::Impl::prepare_for_backward(double loss_scale) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (prepared_) throw Error("GradientReducer: prepare_for_backward() twice without finish()");
  prepared_ = true;
  armed_ = options_.overlap && ctx_->world_size() > 1;
  if (ctx_->world_size() == 1) return;
  loss_scale_ = loss_scale;
  if (trial_ && !trial_->choice()) {
    ctx_->use_hierarchical(trial_->next_hierarchical());
    step_watch_.reset();
  }
  low_rank_ =
      options_.compression == Compression::kPowerSgd && steps_ >= options_.powersgd_start_step;
  if (low_rank_) {
    for (Bucket& bucket : buckets_) {
      if (bucket.powersgd) bucket.powersgd->begin_step();
    }
  }
}

bool GradientReducer::Impl::project_early(size_t index) {
  const auto [b, k] = slot_[index];
  Bucket& bucket = buckets_[b];
  torch::Tensor& grad = params_[index].mutable_grad();
  if (!low_rank_ || !bucket.powersgd || !grad.defined() ||
      !bucket.powersgd->project_early(k, grad, loss_scale_)) {
    return false;
  }
  grad = bucket.slots[k];
  return true;
}

bool GradientReducer::Impl::grad_in_slot(size_t index) const {
  const torch::Tensor& grad = params_[index].grad();
  const auto [b, k] = slot_[index];
  return grad.defined() && grad.data_ptr() == buckets_[b].slots[k].data_ptr();
}

void GradientReducer::Impl::attach_slot(size_t index) {
  torch::Tensor& grad = params_[index].mutable_grad();
  const auto [b, k] = slot_[index];
  torch::Tensor& slot = buckets_[b].slots[k];
  if (grad.defined()) {
    slot.copy_(grad);
  } else {
    slot.zero_();
  }
  grad = slot;
}

void GradientReducer::Impl::on_gradient_ready(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!armed_) return;
  if (ready_[index]) {
    throw Error(
        fmt::format("GradientReducer: gradient of parameter {} ready twice in one iteration; call "
                    "prepare_for_backward() and finish() around each backward",
                    index));
  }
  ready_[index] = 1;
  torch::NoGradGuard no_grad;
  if (!grad_in_slot(index) && !project_early(index)) attach_slot(index);
  if (--buckets_[slot_[index].first].pending == 0) launch_ready_buckets();
}

// Buckets start strictly in order on every rank, so the i-th allreduce is the same bucket
// everywhere even when backward finishes them in a different order (e.g. unused parameters).
void GradientReducer::Impl::launch_ready_buckets() {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    launch(next_launch_++);
  }
}

void GradientReducer::Impl::launch(size_t b) {
  Bucket& bucket = buckets_[b];
  if (low_rank_ && bucket.powersgd) {
    start_allreduce(b, bucket.powersgd->first_payload(loss_scale_), "powersgd P");
    bucket.stage = Bucket::Stage::kFirst;
    advance_before(b);
    return;
  }
  if (bucket.wire.defined()) {
    bucket.wire.copy_(bucket.flat);
    start_allreduce(b, bucket.wire, "allreduce");
  } else {
    start_allreduce(b, bucket.flat, "allreduce");
  }
  bucket.stage = Bucket::Stage::kPlain;
}

void GradientReducer::Impl::advance_before(size_t end) {
  for (; next_advance_ < end; ++next_advance_) {
    Bucket& bucket = buckets_[next_advance_];
    if (bucket.stage != Bucket::Stage::kFirst) continue;
    wait(next_advance_, "first allreduce (PowerSGD P)");
    const torch::Tensor second = bucket.powersgd->second_payload(ctx_->world_size());
    if (!second.defined()) {  // not finite: the step is skipped on every rank
      bucket.stage = Bucket::Stage::kDone;
      continue;
    }
    start_allreduce(next_advance_, second, "powersgd Q");
    bucket.stage = Bucket::Stage::kSecond;
  }
}

void GradientReducer::Impl::wait(size_t b, const char* what) {
  Bucket& bucket = buckets_[b];
  ctx_->watchdog()->wait(
      *bucket.work, bucket.seq,
      fmt::format("{} of gradient bucket {} of {}", what, b + 1, buckets_.size()));
  bucket.work.reset();
}

void GradientReducer::Impl::start_allreduce(size_t b, const torch::Tensor& tensor,
                                            const char* what) {
  Bucket& bucket = buckets_[b];
  std::vector<torch::Tensor> payload{tensor};
  bucket.seq = ctx_->watchdog()->begin();
  const int64_t start_us = now_micros();
  bucket.averaged = shm_ && shm_->holds(tensor);
  bucket.work = bucket.averaged ? shm_->allreduce(tensor, ctx_->world_size())
                                : ctx_->process_group()->allreduce(payload);
  if (timeline_ != nullptr) {
    const int64_t bytes = tensor.numel() * static_cast<int64_t>(tensor.element_size());
    TimelineWriter* timeline = timeline_;
    std::string name = fmt::format("{} bucket {}", what, b);
    bucket.work->getFuture()->addCallback([timeline, name = std::move(name), start_us,
                                           bytes](c10::ivalue::Future&) {
      timeline->record(name, TimelineLane::kAllreduce, start_us, now_micros(), {{"bytes", bytes}});
    });
  }
}

double GradientReducer::Impl::finish() {
  Stopwatch watch;
  torch::NoGradGuard no_grad;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!prepared_) throw Error("GradientReducer: finish() without prepare_for_backward()");
    prepared_ = false;
    armed_ = false;
    if (ctx_->world_size() == 1) {
      ++steps_;
      return 0.0;
    }
    // Gradients that no hook delivered: everything without overlap, unused parameters with it
    // (they contribute zeros, so no rank waits for a gradient that will never come).
    for (size_t i = 0; i < params_.size(); ++i) {
      if (ready_[i]) continue;
      const auto [b, k] = slot_[i];
      if (options_.overlap) {
        buckets_[b].slots[k].zero_();
        params_[i].mutable_grad() = buckets_[b].slots[k];
      } else if (!grad_in_slot(i)) {
        attach_slot(i);
      }
      --buckets_[b].pending;
    }
    launch_ready_buckets();
  }
  advance_before(buckets_.size());
  // The gradients are the buckets' slots: averaging in place is the only pass left.
  const int world = ctx_->world_size();
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = buckets_[b];
    switch (bucket.stage) {
      case Bucket::Stage::kPlain:
        wait(b, "allreduce");
        if (bucket.wire.defined()) bucket.flat.copy_(bucket.wire);
        if (!bucket.averaged) bucket.flat.div_(static_cast<double>(world));
        break;
      case Bucket::Stage::kSecond:
        wait(b, "second allreduce (PowerSGD Q)");
        bucket.powersgd->finish(world, loss_scale_);
        break;
      case Bucket::Stage::kFirst:  // advance_before() issued every second allreduce
      case Bucket::Stage::kDone:
        break;
    }
    bucket.stage = Bucket::Stage::kPlain;
    bucket.pending = bucket.params.size();
  }
  std::fill(ready_.begin(), ready_.end(), 0);
  next_launch_ = 0;
  next_advance_ = 0;
  ++steps_;
  const double exposed = watch.seconds();
  if (trial_ && !trial_->choice()) advance_trial();
  return exposed;
}

void GradientReducer::Impl::advance_trial() {
  if (!trial_->record(step_watch_.seconds())) return;
  const auto [flat, node_by_node] = trial_->totals();
  std::vector<torch::Tensor> sums{torch::tensor({flat, node_by_node}, torch::kDouble)};
  ctx_->allreduce_sum_(sums);
  const double flat_s = sums[0][0].item<double>(), hierarchical_s = sums[0][1].item<double>();
  trial_->decide(flat_s, hierarchical_s);
  ctx_->use_hierarchical(*trial_->choice());
  if (!ctx_->is_main()) return;
  const double per_step = static_cast<double>(HierarchicalTrial::kTimedStepsEach) *
                          ctx_->world_size();  // the timed steps of each path, on every rank
  log::info(
      "--hierarchical=auto: backward and its allreduces took {:.3f} s flat, {:.3f} s "
      "hierarchical (mean of {} steps each over {} ranks; hierarchical when {} % faster): the {} "
      "allreduce is kept",
      flat_s / per_step, hierarchical_s / per_step, HierarchicalTrial::kTimedStepsEach,
      ctx_->world_size(), HierarchicalTrial::kMarginPercent,
      *trial_->choice() ? "hierarchical" : "flat");
}

std::optional<CompressionState> GradientReducer::Impl::compression_state() {
  std::optional<CompressionState> common = common_compression_state();
  if (!common) return std::nullopt;
  CompressionState state = std::move(*common);
  std::vector<torch::Tensor> residuals;
  for (const Bucket& bucket : buckets_) {
    if (bucket.powersgd && bucket.powersgd->started())
      residuals.push_back(bucket.powersgd->residuals());
  }
  if (residuals.empty()) return state;  // before the first compressed step: nothing to keep
  const torch::Tensor all = ctx_->all_gather(torch::cat(residuals));
  for (int r = 0; r < ctx_->world_size(); ++r) {
    if (!ctx_->is_main() && r != ctx_->rank()) continue;
    const std::string prefix = fmt::format("residual.{}.", r);
    int64_t at = 0;
    for (const Bucket& bucket : buckets_) {
      if (!bucket.powersgd || !bucket.powersgd->started()) continue;
      const int64_t numel = bucket.powersgd->residual_numel();
      for (auto& named : bucket.powersgd->split_residuals(all[r].narrow(0, at, numel), prefix))
        state.tensors.push_back(std::move(named));
      at += numel;
    }
  }
  return state;
}

std::optional<CompressionState> GradientReducer::Impl::common_compression_state() const {
  if (options_.compression != Compression::kPowerSgd) return std::nullopt;
  CompressionState state;
  state.steps = steps_;
  state.world_size = ctx_->world_size();
  state.rank = options_.powersgd_rank;
  for (const Bucket& bucket : buckets_) {
    if (!bucket.powersgd || !bucket.powersgd->started()) continue;
    for (auto& named : bucket.powersgd->q_state())
      state.tensors.push_back(std::move(named));
  }
  return state;
}

void GradientReducer::Impl::restore_compression_state(const CompressionState& state) {
  if (options_.compression != Compression::kPowerSgd) return;
  steps_ = state.steps;
  if (state.tensors.empty()) return;
  const bool main = ctx_->is_main();
  if (state.world_size != ctx_->world_size() || state.rank != options_.powersgd_rank) {
    if (main) {
      log::warn(
          "PowerSGD state saved by {} ranks at rank {}, resumed by {} ranks at rank {}: the warm "
          "start and the error feedback restart",
          state.world_size, state.rank, ctx_->world_size(), options_.powersgd_rank);
    }
    return;
  }
  const std::string prefix = fmt::format("residual.{}.", ctx_->rank());
  bool restored = true;
  for (Bucket& bucket : buckets_) {
    if (bucket.powersgd) restored = restored && bucket.powersgd->restore(state.tensors, prefix);
  }
  if (restored) return;
  for (Bucket& bucket : buckets_) {
    if (bucket.powersgd) bucket.powersgd->reset();
  }
  if (main) {
    log::warn(
        "PowerSGD state does not match the matrices this job compresses (another "
        "`powersgd_min_rate`?): the warm start and the error feedback restart");
  }
}

GradientReducer::GradientReducer(std::shared_ptr<DistContext> ctx,
                                 std::vector<torch::Tensor> parameters, ReducerOptions options,
                                 TimelineWriter* timeline)
    : impl_(std::make_unique<Impl>(std::move(ctx), std::move(parameters), std::move(options),
                                   timeline)) {}

GradientReducer::~GradientReducer() = default;

void GradientReducer::detach() {
  impl_->detach();
}

void GradientReducer::prepare_for_backward(double loss_scale) {
  impl_->prepare_for_backward(loss_scale);
}

double GradientReducer::finish() {
  return impl_->finish();
}

size_t GradientReducer::num_buckets() const {
  return impl_->num_buckets();
}

bool GradientReducer::shared_memory() const {
  return impl_->shared_memory();
}

std::optional<CompressionState> GradientReducer::compression_state() {
  return impl_->compression_state();
}

std::optional<CompressionState> GradientReducer::common_compression_state() const {
  return impl_->common_compression_state();
}

void GradientReducer::restore_compression_state(const CompressionState& state) {
  impl_->restore_compression_state(state);
}

}  // namespace chexscale::distributed
