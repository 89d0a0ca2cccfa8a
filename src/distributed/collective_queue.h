// A thread that runs collectives one after another, in the order they were submitted, each
// answered at once by a Work that completes when the thread has run it (PyTorch's ProcessGroupMPI
// progress-thread model). The MPI group runs every MPI call on one; the hierarchical group runs
// its three stages of each allreduce on one, so every rank's stages follow the same order.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace chexscale::distributed {

// A Work completed by a CollectiveQueue, its future (which the reducer's timeline listens to)
// completed first; an exception of the collective is the Work's and the future's error.
class QueuedWork : public c10d::Work {
 public:
  QueuedWork(c10d::OpType type, std::vector<at::Tensor> outputs);
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  void complete(const std::exception_ptr& error);

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class CollectiveQueue {
 public:
  CollectiveQueue();
  // Runs everything submitted, then stops the thread.
  ~CollectiveQueue();
  CollectiveQueue(const CollectiveQueue&) = delete;
  CollectiveQueue& operator=(const CollectiveQueue&) = delete;

  // Queues `run`; the Work (whose result() is `outputs`) completes when it has returned or thrown.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<void()> run);

 private:
  struct Job {
    std::function<void()> run;
    c10::intrusive_ptr<QueuedWork> work;
  };
  void loop();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace chexscale::distributed
