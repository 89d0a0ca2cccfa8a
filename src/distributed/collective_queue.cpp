// CollectiveQueue: one thread, a FIFO of collectives, a Work per collective (collective_queue.h).
#include "distributed/collective_queue.h"

#include <ATen/core/ivalue.h>

namespace chexscale::distributed {

QueuedWork::QueuedWork(c10d::OpType type, std::vector<at::Tensor> outputs)
    : c10d::Work(-1, type),
      outputs_(std::move(outputs)),
      future_(
          c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {
}

void QueuedWork::complete(const std::exception_ptr& error) {
  if (error) {
    future_->setError(error);
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
  finish(error);
}

CollectiveQueue::CollectiveQueue() : thread_([this] { loop(); }) {}

CollectiveQueue::~CollectiveQueue() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  thread_.join();
}

c10::intrusive_ptr<c10d::Work> CollectiveQueue::enqueue(c10d::OpType type,
                                                        std::vector<at::Tensor> outputs,
                                                        std::function<void()> run) {
  auto work = c10::make_intrusive<QueuedWork>(type, std::move(outputs));
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(run), work});
  }
  ready_.notify_one();
  return work;
}

void CollectiveQueue::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything submitted has run
    Job job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    std::exception_ptr error;
    try {
      job.run();
    } catch (...) {
      error = std::current_exception();
    }
    job.work->complete(error);
    lock.lock();
  }
}

}  // namespace chexscale::distributed
