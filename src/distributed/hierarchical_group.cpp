// The hierarchical process group and the node and across groups under it (hierarchical_group.h).
#include "distributed/hierarchical_group.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <memory>

#include "common/error.h"
#include "distributed/collective_queue.h"
#include "distributed/node_group_messages.h"

namespace chexscale::distributed {
namespace {

class HierarchicalGroup final : public compat::CollectiveGroup {
 public:
  HierarchicalGroup(c10::intrusive_ptr<compat::CollectiveGroup> world, NodeGroups groups,
                    std::shared_ptr<const std::atomic<bool>> node_by_node)
      : compat::CollectiveGroup(world->getRank(), world->getSize()),
        world_(std::move(world)),
        node_(std::move(groups.node)),
        across_(std::move(groups.across)),
        node_by_node_(std::move(node_by_node)),
        queue_(std::make_unique<CollectiveQueue>()) {}

  ~HierarchicalGroup() override { queue_.reset(); }  // runs what was submitted first

  const std::string getBackendName() const override { return world_->getBackendName(); }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    if (!node_by_node_->load()) return world_->allreduce(tensors, opts);
    TORCH_CHECK(tensors.size() == 1, "hierarchical allreduce takes one tensor, got ",
                tensors.size());
    const at::Tensor t = tensors[0];
    TORCH_CHECK(t.is_contiguous(), "hierarchical allreduce takes a contiguous tensor");
    return queue_->enqueue(c10d::OpType::ALLREDUCE, {t}, [this, t, opts] {
      std::vector<std::vector<at::Tensor>> chunks{node_chunks(t)};
      std::vector<at::Tensor> mine{chunks[0][node_->getRank()]};
      c10d::ReduceScatterOptions in_node;
      in_node.reduceOp = opts.reduceOp;
      node_->reduce_scatter(mine, chunks, in_node)->wait();
      // Every rank of `across` holds a chunk of the same size: an empty one is skipped by all.
      if (mine[0].numel() > 0) across_->allreduce(mine, opts)->wait();
      node_->allgather(chunks, mine)->wait();
    });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    std::vector<at::Tensor> io = tensors;
    return queue_->enqueue(c10d::OpType::BROADCAST, io,
                           [this, io, opts]() mutable { world_->broadcast(io, opts)->wait(); });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override {
    std::vector<std::vector<at::Tensor>> out = outputs;
    std::vector<at::Tensor> in = inputs;
    return queue_->enqueue(
        c10d::OpType::ALLGATHER, out.empty() ? in : out[0],
        [this, out, in, opts]() mutable { world_->allgather(out, in, opts)->wait(); });
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override {
    std::vector<at::Tensor> io = tensors;
    return queue_->enqueue(c10d::OpType::SEND, io,
                           [this, io, dst, tag]() mutable { world_->send(io, dst, tag)->wait(); });
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override {
    std::vector<at::Tensor> io = tensors;
    return queue_->enqueue(c10d::OpType::RECV, io,
                           [this, io, src, tag]() mutable { world_->recv(io, src, tag)->wait(); });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override {
    return queue_->enqueue(c10d::OpType::BARRIER, {},
                           [this, opts] { world_->barrier(opts)->wait(); });
  }

 private:
  // `t` cut into one chunk per rank of the node, of sizes that differ by one element at most.
  std::vector<at::Tensor> node_chunks(const at::Tensor& t) const {
    const at::Tensor flat = t.view(-1);
    const int64_t n = flat.numel(), parts = node_->getSize();
    std::vector<at::Tensor> chunks;
    for (int64_t r = 0; r < parts; ++r) {
      const int64_t begin = n * r / parts, end = n * (r + 1) / parts;
      chunks.push_back(flat.narrow(0, begin, end - begin));
    }
    return chunks;
  }

  c10::intrusive_ptr<compat::CollectiveGroup> world_, node_, across_;
  std::shared_ptr<const std::atomic<bool>> node_by_node_;
  std::unique_ptr<CollectiveQueue> queue_;
};

RendezvousEnv with_rank(RendezvousEnv env, int rank, int size) {
  env.rank.value = rank;
  env.world_size.value = size;
  return env;
}

}  // namespace

void require_hierarchical_backend(Backend backend) {
  if (backend == Backend::kGloo || backend == Backend::kMpi) return;
  throw UsageError(fmt::format(
      "--hierarchical is for the gloo and mpi backends, not {}: NCCL already reduces inside each "
      "node before it crosses the network",
      to_string(backend)));
}

NodeGroups make_node_groups(Backend backend, const c10::intrusive_ptr<c10d::Store>& store,
                            const RendezvousEnv& env, const GlooAddress& address,
                            std::chrono::milliseconds timeout, const NodeLayout& layout,
                            MpiAllreduce mpi_allreduce) {
  NodeGroups groups;
  switch (backend) {
    case Backend::kGloo: {
      const GlooAddress loopback{"", "127.0.0.1", "loopback inside the node"};
      auto node_store =
          c10::make_intrusive<c10d::PrefixStore>(fmt::format("hier/node{}", layout.node), store);
      groups.node = make_node_group_of_messages(make_gloo_group(
          node_store, with_rank(env, layout.local_rank, layout.local_size), loopback, timeout));
      auto across_store = c10::make_intrusive<c10d::PrefixStore>(
          fmt::format("hier/across{}", layout.local_rank), store);
      groups.across = make_gloo_group(across_store, with_rank(env, layout.node, layout.nodes),
                                      address, timeout);
      return groups;
    }
    case Backend::kMpi:
      groups.node = make_mpi_subgroup(layout.node, layout.local_rank, mpi_allreduce);
      groups.across = make_mpi_subgroup(layout.local_rank, layout.node, mpi_allreduce);
      return groups;
    default:
      require_hierarchical_backend(backend);
      return groups;
  }
}

c10::intrusive_ptr<compat::CollectiveGroup> make_hierarchical_group(
    c10::intrusive_ptr<compat::CollectiveGroup> world, NodeGroups groups,
    std::shared_ptr<const std::atomic<bool>> node_by_node) {
  return c10::make_intrusive<HierarchicalGroup>(std::move(world), std::move(groups),
                                                std::move(node_by_node));
}

}  // namespace chexscale::distributed
