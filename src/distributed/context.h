// A joined distributed job: who we are (rank, world), and the process group for collectives.
// World size 1 is a valid job with no process group; every collective helper is then a no-op.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/torch_compat.h"
#include "distributed/dist_options.h"

namespace c10d {
class Store;
}  // namespace c10d

namespace chexscale::distributed {

class CollectiveWatchdog;
class ElasticRound;

class DistContext {
 public:
  // Reads the environment contract (torchrun names, else OpenMPI, PMI, Slurm, Indexed Job),
  // rendezvous through the TCPStore served by rank 0, and creates the process group.
  // `env_overrides` replace variables of the process environment (a worker regrouping in place
  // takes its new rank, world size and store prefix from its agent this way). In place, a round
  // that ends before its ranks have all met is left for the agent's next place (elastic_round()
  // names the round the context is in).
  static std::shared_ptr<DistContext> init(
      const DistOptions& options, const std::map<std::string, std::string>& env_overrides = {});

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_world_size() const { return local_world_size_; }
  bool is_main() const { return rank_ == 0; }
  // "gloo", "nccl" or "mpi"; "none" when world_size == 1 (no process group).
  const char* backend() const { return backend_ ? to_string(*backend_) : "none"; }
  torch::Device device() const { return device_; }  // cpu or cuda:LOCAL_RANK (options.device)
  // True when allreduce goes node by node (--hierarchical, on nodes of several ranks each; with
  // --hierarchical=auto, the path of the current step).
  bool hierarchical() const { return node_by_node_ && node_by_node_->load(); }
  // True when --hierarchical=auto is to choose between the paths (nodes of several ranks each):
  // the gradient reducer runs the trial (hierarchical_trial.h).
  bool hierarchical_auto() const { return hierarchical_auto_; }
  // With hierarchical_auto(): the path of the allreduces issued from now on. Every rank must
  // switch alike, between steps, with no allreduce in flight.
  void use_hierarchical(bool node_by_node);

  // Collectives used outside the gradient reducer (blocking, watchdog-guarded). Tensors may be
  // on the CPU with any backend: NCCL's copies travel through device() and come back.
  void broadcast_(std::vector<torch::Tensor>& tensors, int root = 0);
  // Rank `root`'s `tensor` into `tensor` on each rank of `receivers` only, by point-to-point
  // messages (what a broadcast would send to every rank, sent to those who lack it). Every rank
  // calls it (it counts as one collective); the ranks neither root nor receiver do nothing.
  void send_from_(torch::Tensor& tensor, int root, const std::vector<int>& receivers);
  void allreduce_sum_(std::vector<torch::Tensor>& tensors);
  // Gathers a 1-D or N-D tensor with equal shape on every rank into [world, ...shape].
  torch::Tensor all_gather(const torch::Tensor& t);
  void barrier();

  // The collective group (c10d::ProcessGroup on LibTorch 1.13, c10d::Backend on 2.x); nullptr
  // when world_size == 1. Waiting on its Work objects directly bypasses the watchdog.
  compat::CollectiveGroup* process_group() const;
  // The job's rendezvous store, for code that agrees on something by key (the reducer's shared
  // memory); nullptr when world_size == 1.
  c10d::Store* store() const;
  // The watchdog guarding every collective, for code that issues its own (the reducer); nullptr
  // when world_size == 1.
  CollectiveWatchdog* watchdog() const;
  // Under `chexscale launch --elastic in-place` (gloo, several workers): the link to this
  // node's agent that says when the round ends and where the worker goes next; else nullptr.
  ElasticRound* elastic_round() const;
  ~DistContext();

 private:
  DistContext() = default;
  static std::shared_ptr<DistContext> standby_context(
      const DistOptions& options, const std::map<std::string, std::string>& env);
  // The context at the agent's next place after `round`, which ended before its ranks met.
  static std::shared_ptr<DistContext> at_next_place(
      const DistOptions& options, std::map<std::string, std::string> env_overrides,
      ElasticRound& round);
  // Where the helper collectives must put their buffers (the GPU with NCCL), nullopt = anywhere.
  std::optional<torch::Device> collective_device() const;
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, local_world_size_ = 1;
  std::optional<Backend> backend_;
  std::shared_ptr<std::atomic<bool>> node_by_node_;  // null: the flat allreduce only
  bool hierarchical_auto_ = false;
  torch::Device device_{torch::kCPU};
  struct State;
  std::unique_ptr<State> state_;
  std::unique_ptr<ElasticRound> elastic_;
};

// Copies rank 0's parameters and buffers to every rank.
void broadcast_module(DistContext& ctx, torch::nn::Module& module);

}  // namespace chexscale::distributed
