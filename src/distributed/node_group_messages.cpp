// Reduce-scatter and allgather as point-to-point messages on a node's Gloo group
// (node_group_messages.h).
#include "distributed/node_group_messages.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <exception>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "distributed/collective_queue.h"
#include "distributed/kept_buffer.h"

namespace chexscale::distributed {
namespace {

// Tags of the two exchanges' messages; an exchange's messages all end before the next begins.
constexpr int kReduceScatterTag = 0;
constexpr int kAllgatherTag = 1;

// `into` combined with `part` by `op`, in place.
void combine(at::Tensor& into, const at::Tensor& part, c10d::ReduceOp op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      into.add_(part);
      return;
    case c10d::ReduceOp::PRODUCT:
      into.mul_(part);
      return;
    case c10d::ReduceOp::MIN:
      into.copy_(at::minimum(into, part));
      return;
    case c10d::ReduceOp::MAX:
      into.copy_(at::maximum(into, part));
      return;
    default:
      TORCH_CHECK(false, "the node's reduce-scatter takes sum, product, min or max");
  }
}

// A Work that has already run `run` (its error, if any, is the Work's).
template <typename Run>
c10::intrusive_ptr<c10d::Work> run_now(c10d::OpType type, std::vector<at::Tensor> outputs,
                                       Run&& run) {
  auto work = c10::make_intrusive<QueuedWork>(type, std::move(outputs));
  try {
    run();
    work->complete(nullptr);
  } catch (...) {
    work->complete(std::current_exception());
  }
  return work;
}

void wait_all(const std::vector<c10::intrusive_ptr<c10d::Work>>& works) {
  for (const auto& work : works)
    work->wait();
}

class NodeGroupOfMessages final : public compat::CollectiveGroup {
 public:
  explicit NodeGroupOfMessages(c10::intrusive_ptr<compat::CollectiveGroup> group)
      : compat::CollectiveGroup(group->getRank(), group->getSize()), group_(std::move(group)) {}

  const std::string getBackendName() const override { return group_->getBackendName(); }

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override {
    const std::vector<at::Tensor> chunks = checked_chunks(inputs, "reduce_scatter");
    TORCH_CHECK(outputs.size() == 1 && outputs[0].numel() == chunks[rank_].numel(),
                "the node's reduce_scatter takes one output of the size of this rank's chunk");
    at::Tensor mine = outputs[0];
    return run_now(c10d::OpType::REDUCE_SCATTER, {mine}, [&] {
      require_reducible(mine.scalar_type(), opts.reduceOp);
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      std::vector<at::Tensor> received;
      if (mine.numel() > 0) {
        const at::Tensor space = received_.get(mine.scalar_type(), (size_ - 1) * mine.numel());
        for (int r = 0; r < size_; ++r) {
          if (r == rank_) continue;
          received.push_back(space.narrow(0, received.size() * mine.numel(), mine.numel()));
          std::vector<at::Tensor> into{received.back()};
          works.push_back(group_->recv(into, r, kReduceScatterTag));
        }
      }
      for (int r = 0; r < size_; ++r) {
        if (r == rank_ || chunks[r].numel() == 0) continue;
        std::vector<at::Tensor> out{chunks[r]};
        works.push_back(group_->send(out, r, kReduceScatterTag));
      }
      wait_all(works);
      if (!mine.is_same(chunks[rank_])) mine.copy_(chunks[rank_]);
      for (const at::Tensor& part : received)
        combine(mine, part, opts.reduceOp);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& /*opts*/) override {
    const std::vector<at::Tensor> chunks = checked_chunks(outputs, "allgather");
    TORCH_CHECK(inputs.size() == 1 && inputs[0].numel() == chunks[rank_].numel(),
                "the node's allgather takes one input of the size of this rank's chunk");
    const at::Tensor mine = inputs[0];
    return run_now(c10d::OpType::ALLGATHER, chunks, [&] {
      std::vector<c10::intrusive_ptr<c10d::Work>> works;
      for (int r = 0; r < size_; ++r) {
        if (r == rank_ || chunks[r].numel() == 0) continue;
        std::vector<at::Tensor> into{chunks[r]};
        works.push_back(group_->recv(into, r, kAllgatherTag));
      }
      if (mine.numel() > 0) {
        for (int r = 0; r < size_; ++r) {
          if (r == rank_) continue;
          std::vector<at::Tensor> out{mine};
          works.push_back(group_->send(out, r, kAllgatherTag));
        }
      }
      wait_all(works);
      if (!chunks[rank_].is_same(mine)) chunks[rank_].copy_(mine);
    });
  }

 private:
  // Messages move any type, but the job's other reductions are Gloo's: a type or operation that
  // Gloo cannot reduce (bfloat16 in LibTorch 1.13) must fail here too, and on every rank before
  // any message, as Gloo's own allreduce does. The wrapped group's allreduce of one element, once
  // per type and operation (every rank of the node reduces the same ones in the same order),
  // says so.
  void require_reducible(c10::ScalarType type, c10d::ReduceOp op) {
    const auto key = std::make_pair(type, static_cast<int>(op));
    auto known = reducible_.find(key);
    if (known == reducible_.end()) {
      std::string error;
      try {
        std::vector<at::Tensor> probe{at::zeros({1}, at::TensorOptions().dtype(type))};
        c10d::AllreduceOptions options;
        options.reduceOp = op;
        group_->allreduce(probe, options)->wait();
      } catch (const c10::Error& e) {
        error = e.what_without_backtrace();
      }
      known = reducible_.emplace(key, error).first;
    }
    TORCH_CHECK(known->second.empty(), known->second);
  }

  // The one list of per-rank chunks of `lists`, each contiguous.
  std::vector<at::Tensor> checked_chunks(const std::vector<std::vector<at::Tensor>>& lists,
                                         const char* what) const {
    TORCH_CHECK(lists.size() == 1 && lists[0].size() == static_cast<size_t>(size_), "the node's ",
                what, " takes one list of ", size_, " chunks");
    for (const at::Tensor& chunk : lists[0])
      TORCH_CHECK(chunk.is_contiguous(), "the node's ", what, " takes contiguous chunks");
    return lists[0];
  }

  c10::intrusive_ptr<compat::CollectiveGroup> group_;
  // Per type and operation: empty where Gloo reduces it, else its error.
  std::map<std::pair<c10::ScalarType, int>, std::string> reducible_;
  KeptBuffer received_;  // where reduce_scatter receives the other ranks' parts
};

}  // namespace

c10::intrusive_ptr<compat::CollectiveGroup> make_node_group_of_messages(
    c10::intrusive_ptr<compat::CollectiveGroup> group) {
  return c10::make_intrusive<NodeGroupOfMessages>(std::move(group));
}

}  // namespace chexscale::distributed
