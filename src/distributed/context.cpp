// DistContext: joins the job (environment contract, rendezvous, process group) and runs the
// blocking, watchdog-guarded collectives used outside the gradient reducer.
#include "distributed/context.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <algorithm>
#include <csignal>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "common/error.h"
#include "common/log.h"
#include "distributed/device.h"
#include "distributed/elastic_round.h"
#include "distributed/env.h"
#include "distributed/hierarchical_group.h"
#include "distributed/hierarchical_trial.h"
#include "distributed/node_layout.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"
#include "distributed/watchdog.h"

namespace chexscale::distributed {

struct DistContext::State {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<compat::CollectiveGroup> group;
  std::unique_ptr<CollectiveWatchdog> watchdog;

  // Issues one collective and waits for it under the watchdog.
  void run(const std::string& what,
           const std::function<c10::intrusive_ptr<c10d::Work>()>& issue) const {
    const uint64_t seq = watchdog->begin();
    c10::intrusive_ptr<c10d::Work> work;
    try {
      work = issue();
    } catch (const c10::Error& e) {
      throw DistError(fmt::format("{} could not start: {}", what, e.what_without_backtrace()));
    }
    watchdog->wait(*work, seq, what);
  }
};

namespace {

// Tensors grouped by (dtype, device): each group travels as one flat buffer, since c10d treats a
// list of tensors in one call as copies on different devices, not as a batch.
std::map<std::pair<int, std::string>, std::vector<torch::Tensor*>> group_by_type(
    std::vector<torch::Tensor>& tensors) {
  std::map<std::pair<int, std::string>, std::vector<torch::Tensor*>> groups;
  for (auto& t : tensors) {
    groups[{static_cast<int>(t.scalar_type()), t.device().str()}].push_back(&t);
  }
  return groups;
}

// Runs `collective` on each group's flat buffer, on `device` when it is given (NCCL only takes
// GPU tensors), and copies the result back into the tensors. A group of one contiguous tensor
// already on that device is its own buffer: the collective works in place, with no copy (a
// regroup's 134 MB state buffer, for one, is sent from and received into where it lies).
void for_each_flat_group(std::vector<torch::Tensor>& tensors, std::optional<torch::Device> device,
                         const std::function<void(torch::Tensor&)>& collective) {
  torch::NoGradGuard no_grad;
  for (auto& [key, group] : group_by_type(tensors)) {
    torch::Tensor& only = *group.front();
    if (group.size() == 1 && only.is_contiguous() && (!device || only.device() == *device)) {
      torch::Tensor in_place = only.view(-1);
      collective(in_place);
      continue;
    }
    std::vector<torch::Tensor> flat_parts;
    flat_parts.reserve(group.size());
    for (torch::Tensor* t : group)
      flat_parts.push_back(t->reshape(-1));
    torch::Tensor flat = torch::cat(flat_parts);
    if (device) flat = flat.to(*device);
    collective(flat);
    int64_t offset = 0;
    for (torch::Tensor* t : group) {
      t->copy_(flat.narrow(0, offset, t->numel()).view_as(*t));
      offset += t->numel();
    }
  }
}

// The process group of `backend` (Gloo binds to `gloo_address`; MPI allreduces by
// `mpi_allreduce`); LibTorch's errors as DistError naming the backend and rank.
c10::intrusive_ptr<compat::CollectiveGroup> make_group(Backend backend,
                                                       const c10::intrusive_ptr<c10d::Store>& store,
                                                       const RendezvousEnv& env,
                                                       const GlooAddress& gloo_address,
                                                       MpiAllreduce mpi_allreduce,
                                                       std::chrono::milliseconds timeout) {
  try {
    switch (backend) {
      case Backend::kNccl:
        return make_nccl_group(store, env, timeout);
      case Backend::kMpi:
        return make_mpi_group(env, mpi_allreduce);
      default:
        return make_gloo_group(store, env, gloo_address, timeout);
    }
  } catch (const c10::Error& e) {
    throw DistError(fmt::format("creating the {} process group failed on rank {}: {}",
                                to_string(backend), env.rank.value, e.what_without_backtrace()));
  }
}

// How the group's ranks reach each other, for the log.
std::string transport_of(Backend backend, const GlooAddress& gloo_address) {
  switch (backend) {
    case Backend::kNccl:
      return "one GPU per local rank";
    case Backend::kMpi:
      return "MPI_COMM_WORLD of the MPI launcher";
    default:
      return gloo_address.reason;
  }
}

// Every rank's node from every rank's local rank and size (one allgather).
NodeLayout gather_node_layout(DistContext& ctx, const RendezvousEnv& env) {
  const torch::Tensor all = ctx.all_gather(
      torch::tensor({env.local_rank.value, env.local_world_size.value}, torch::kLong));
  std::vector<std::pair<int, int>> local_ranks;
  for (int64_t r = 0; r < all.size(0); ++r)
    local_ranks.emplace_back(all[r][0].item<int>(), all[r][1].item<int>());
  return node_layout(env.rank.value, local_ranks);
}

// --hierarchical: wraps `world` (the world group) so that allreduce goes node -> across -> node
// while the returned switch holds true; returns null, `world` unchanged (and a log line saying
// so), where that would be the flat allreduce again.
std::shared_ptr<std::atomic<bool>> wrap_node_by_node(
    c10::intrusive_ptr<compat::CollectiveGroup>& world, const NodeLayout& layout, Backend backend,
    const DistOptions& options, const c10::intrusive_ptr<c10d::Store>& store,
    const RendezvousEnv& env, const GlooAddress& address) {
  if (layout.flat()) {
    log::info("--hierarchical: {} node(s) of {} rank(s): the flat allreduce is the same, kept",
              layout.nodes, layout.local_size);
    return nullptr;
  }
  NodeGroups groups;
  try {
    groups = make_node_groups(backend, store, env, address, options.collective_timeout, layout,
                              options.mpi_allreduce);
  } catch (const c10::Error& e) {
    throw DistError(fmt::format("creating the hierarchical groups failed on rank {} ({}): {}",
                                env.rank.value, layout.describe(), e.what_without_backtrace()));
  }
  log::info(
      "hierarchical allreduce: {}; reduce-scatter inside the node, each rank's share allreduced "
      "across the {} nodes, allgather inside the node{}",
      layout.describe(), layout.nodes,
      options.hierarchical == Hierarchical::kAuto
          ? fmt::format("; tried against the flat ring on the first {} steps, kept if {} % faster",
                        HierarchicalTrial::kSteps, HierarchicalTrial::kMarginPercent)
          : "");
  auto path = std::make_shared<std::atomic<bool>>(true);
  world = make_hierarchical_group(std::move(world), std::move(groups), path);
  return path;
}

// The process's environment with `overrides` over it.
std::map<std::string, std::string> environment_with(
    const std::map<std::string, std::string>& overrides) {
  auto env = process_environment();
  for (const auto& [name, value] : overrides)
    env[name] = value;
  return env;
}

// A worker of an --elastic in-place node that has not joined a round yet.
bool in_standby(const std::map<std::string, std::string>& env) {
  const auto round = env.find(kEnvElasticRound);
  return round != env.end() && round->second == kElasticStandby;
}

// Refuses what `backend` cannot do: mpi without an MPI launcher, --hierarchical with nccl, an
// MPI allreduce choice with any other backend.
void require_backend_options(Backend backend, const DistOptions& options,
                             const RendezvousEnv& env) {
  if (backend == Backend::kMpi) require_mpi_launcher(env);
  if (options.hierarchical != Hierarchical::kOff) require_hierarchical_backend(backend);
  if (options.mpi_allreduce != MpiAllreduce::kAuto && backend != Backend::kMpi) {
    throw UsageError(fmt::format("mpi_allreduce {} is for `backend` mpi, and this job's is {}",
                                 to_string(options.mpi_allreduce), to_string(backend)));
  }
}

// --elastic in-place rebuilds Gloo groups only.
void require_in_place_backend(Backend b) {
  if (b == Backend::kGloo) return;
  throw UsageError(fmt::format(
      "`backend` {}: --elastic in-place regroups Gloo process groups only (an NCCL or MPI "
      "communicator cannot be rebuilt without its lost ranks here); use gloo, or the restart "
      "path (--elastic restart)",
      to_string(b)));
}

// --elastic in-place: the worker's link to its round (Gloo only); nullptr for other jobs.
std::unique_ptr<ElasticRound> elastic_round_for(
    const std::map<std::string, std::string>& process_env, const RendezvousEnv& env,
    Backend backend) {
  const auto mode = process_env.find(kEnvElasticMode);
  if (mode == process_env.end() || mode->second.empty()) return nullptr;
  require_in_place_backend(backend);
  return ElasticRound::from_environment(process_env, env);
}

}  // namespace

// A worker in standby (--elastic in-place): a world of its own until its agent posts its place;
// the trainer prepares in it, then regroups into the round.
std::shared_ptr<DistContext> DistContext::standby_context(
    const DistOptions& options, const std::map<std::string, std::string>& env) {
  std::shared_ptr<DistContext> ctx(new DistContext());
  const auto local = [&](const char* name) {
    const auto it = env.find(name);
    return it == env.end() ? 0 : std::atoi(it->second.c_str());
  };
  ctx->local_rank_ = local(kEnvLocalRank);
  ctx->local_world_size_ = std::max(1, local(kEnvLocalWorldSize));
  ctx->device_ = resolve_device(options.device, ctx->local_rank_, ctx->local_world_size_);
  make_current_device(ctx->device_);
  require_in_place_backend(resolve_backend(options.backend, ctx->device_));
  ctx->elastic_ = ElasticRound::standby(env);
  return ctx;
}

std::shared_ptr<DistContext> DistContext::at_next_place(
    const DistOptions& options, std::map<std::string, std::string> env_overrides,
    ElasticRound& round) {
  log::info("round {} ended before its ranks met: waiting for this node's next place",
            round.round());
  const auto timeout = std::chrono::duration_cast<std::chrono::milliseconds>(options.rdzv_timeout);
  for (const auto& [name, value] : round.environment_for(round.wait_next_place(timeout)))
    env_overrides[name] = value;
  return init(options, env_overrides);
}

std::shared_ptr<DistContext> DistContext::init(
    const DistOptions& options, const std::map<std::string, std::string>& env_overrides) {
  options.validate();
  const auto process_env = environment_with(env_overrides);
  if (in_standby(process_env)) return standby_context(options, process_env);
  const RendezvousEnv env = detect_environment(process_env, options);
  std::shared_ptr<DistContext> ctx(new DistContext());
  ctx->rank_ = env.rank.value;
  ctx->world_size_ = env.world_size.value;
  ctx->local_rank_ = env.local_rank.value;
  ctx->local_world_size_ = env.local_world_size.value;
  ctx->device_ = resolve_device(options.device, env.local_rank.value, env.local_world_size.value);
  make_current_device(ctx->device_);
  const Backend backend = resolve_backend(options.backend, ctx->device_);
  require_backend_options(backend, options, env);
  ctx->elastic_ = elastic_round_for(process_env, env, backend);
  if (env.world_size.value == 1) return ctx;

  // A peer that vanishes must surface as an error on the next collective, not kill us silently.
  std::signal(SIGPIPE, SIG_IGN);
  const auto rdzv_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(options.rdzv_timeout);
  const auto collective_timeout =
      std::chrono::duration_cast<std::chrono::milliseconds>(options.collective_timeout);
  GlooAddress gloo_address;
  if (backend == Backend::kGloo) gloo_address = choose_gloo_address(env, process_env);
  log::info("joining as rank {} of {} (local {} of {}, {} convention) through the store at {}",
            env.rank.value, env.world_size.value, env.local_rank.value, env.local_world_size.value,
            env.convention, store_address(env));

  auto state = std::make_unique<State>();
  try {
    state->store = rendezvous(env, rdzv_timeout, [round = ctx->elastic_.get()] {
      return round != nullptr && round->ended();
    });
  } catch (const RendezvousAbandoned&) {
    return at_next_place(options, env_overrides, *ctx->elastic_);
  }
  auto group_store = c10::make_intrusive<c10d::PrefixStore>("pg", state->store);
  state->group = make_group(backend, group_store, env, gloo_address, options.mpi_allreduce,
                            collective_timeout);
  state->watchdog = std::make_unique<CollectiveWatchdog>(
      state->store, env.rank.value, env.world_size.value, collective_timeout, store_address(env));
  if (ctx->elastic_) {
    state->watchdog->set_abandon([round = ctx->elastic_.get()] { return round->abandon_reason(); });
  }
  ctx->backend_ = backend;
  ctx->state_ = std::move(state);
  if (options.hierarchical != Hierarchical::kOff) {
    ctx->node_by_node_ = wrap_node_by_node(ctx->state_->group, gather_node_layout(*ctx, env),
                                           backend, options, group_store, env, gloo_address);
    ctx->hierarchical_auto_ = ctx->node_by_node_ && options.hierarchical == Hierarchical::kAuto;
  }
  log::debug("process group ready: {} ({})", to_string(backend),
             transport_of(backend, gloo_address));
  return ctx;
}

DistContext::~DistContext() {
  if (!state_) return;
  const bool failing = state_->watchdog->failed() || std::uncaught_exceptions() > 0;
  state_->watchdog.reset();
  if (failing) {
    // Collective threads may be stuck on a lost peer; joining them would hang the exit, so the
    // group and the store are left to the end of the process on purpose.
    state_->group.release();
    state_->store.release();
  }
}

void DistContext::use_hierarchical(bool node_by_node) {
  if (!hierarchical_auto_) throw Error("use_hierarchical() without --hierarchical=auto");
  node_by_node_->store(node_by_node);
}

compat::CollectiveGroup* DistContext::process_group() const {
  return state_ ? state_->group.get() : nullptr;
}

ElasticRound* DistContext::elastic_round() const {
  return elastic_.get();
}

c10d::Store* DistContext::store() const {
  return state_ ? state_->store.get() : nullptr;
}

CollectiveWatchdog* DistContext::watchdog() const {
  return state_ ? state_->watchdog.get() : nullptr;
}

void DistContext::broadcast_(std::vector<torch::Tensor>& tensors, int root) {
  if (!state_ || tensors.empty()) return;
  for_each_flat_group(tensors, collective_device(), [&](torch::Tensor& flat) {
    std::vector<torch::Tensor> io{flat};
    c10d::BroadcastOptions opts;
    opts.rootRank = root;
    state_->run(fmt::format("broadcast from rank {}", root),
                [&] { return state_->group->broadcast(io, opts); });
  });
}

void DistContext::send_from_(torch::Tensor& tensor, int root, const std::vector<int>& receivers) {
  if (!state_ || receivers.empty()) return;
  const bool receiving = std::find(receivers.begin(), receivers.end(), rank_) != receivers.end();
  if (rank_ != root && !receiving) {
    state_->watchdog->begin();  // every rank numbers its collectives alike
    return;
  }
  const auto device = collective_device();
  std::vector<torch::Tensor> io{device ? tensor.to(*device) : tensor};
  constexpr int kTag = 0;
  // The sends all issued first: the receivers take theirs side by side.
  const uint64_t seq = state_->watchdog->begin();
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, std::string>> works;
  try {
    if (receiving) {
      works.emplace_back(state_->group->recv(io, root, kTag),
                         fmt::format("receive from rank {}", root));
    } else {
      for (const int r : receivers)
        works.emplace_back(state_->group->send(io, r, kTag), fmt::format("send to rank {}", r));
    }
  } catch (const c10::Error& e) {
    throw DistError(fmt::format("a send from rank {} could not start on rank {}: {}", root, rank_,
                                e.what_without_backtrace()));
  }
  for (const auto& [work, what] : works)
    state_->watchdog->wait_point_to_point(work, seq, what);
  if (io[0].data_ptr() != tensor.data_ptr()) tensor.copy_(io[0].to(tensor.device()));
}

void DistContext::allreduce_sum_(std::vector<torch::Tensor>& tensors) {
  if (!state_ || tensors.empty()) return;
  for_each_flat_group(tensors, collective_device(), [&](torch::Tensor& flat) {
    std::vector<torch::Tensor> io{flat};
    state_->run("allreduce", [&] { return state_->group->allreduce(io); });
  });
}

torch::Tensor DistContext::all_gather(const torch::Tensor& t) {
  if (!state_) return t.unsqueeze(0).clone();
  const auto device = collective_device();
  std::vector<torch::Tensor> input{device ? t.to(*device).contiguous() : t.contiguous()};
  std::vector<std::vector<torch::Tensor>> output(1);
  for (int r = 0; r < world_size_; ++r)
    output[0].push_back(torch::empty_like(input[0]));
  state_->run("allgather", [&] { return state_->group->allgather(output, input); });
  return torch::stack(output[0]).to(t.device());
}

std::optional<torch::Device> DistContext::collective_device() const {
  if (backend_ == Backend::kNccl) return device_;
  return std::nullopt;
}

void DistContext::barrier() {
  if (!state_) return;
  state_->run("barrier", [&] { return state_->group->barrier(); });
}

void broadcast_module(DistContext& ctx, torch::nn::Module& module) {
  if (ctx.world_size() == 1) return;
  std::vector<torch::Tensor> tensors;
  for (auto& p : module.parameters())
    tensors.push_back(p);
  for (auto& b : module.buffers())
    tensors.push_back(b);
  ctx.broadcast_(tensors, 0);
}

}  // namespace chexscale::distributed
