// Runs N real worker processes as one job on this host (torchrun's environment, a free port) for
// the multi-process tests, as one node or as nodes of `ranks_per_node` ranks each (LOCAL_RANK,
// LOCAL_WORLD_SIZE and GROUP_RANK as torchrun sets them on each node); each rank's stdout and
// stderr go to <log_dir>/rank<N>.log. And what the test workers leave for the test: their progress
// file and the tensors they saved.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "distributed/rendezvous.h"
#include "test_util/process.h"
#include "test_util/read_file.h"

namespace chexscale::test_util {

class WorkerGroup {
 public:
  WorkerGroup(const std::string& program, const std::vector<std::string>& args, int world,
              const std::string& log_dir, const std::map<std::string, std::string>& env = {},
              int ranks_per_node = 0)
      : start_(std::chrono::steady_clock::now()) {
    const int local = ranks_per_node > 0 ? ranks_per_node : world;
    const int port = distributed::pick_free_port();
    std::vector<std::string> argv{program};
    argv.insert(argv.end(), args.begin(), args.end());
    for (int rank = 0; rank < world; ++rank) {
      std::vector<std::string> vars;
      for (const auto& [name, value] : env)
        vars.push_back(name + "=" + value);
      vars.insert(vars.end(),
                  {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port),
                   "WORLD_SIZE=" + std::to_string(world), "RANK=" + std::to_string(rank),
                   "LOCAL_RANK=" + std::to_string(rank % local),
                   "LOCAL_WORLD_SIZE=" + std::to_string(local),
                   "GROUP_RANK=" + std::to_string(rank / local)});
      ranks_.push_back(std::make_unique<Process>(ProcessSpec{
          argv, environment_with(vars), log_dir + "/rank" + std::to_string(rank) + ".log"}));
    }
  }

  pid_t pid(int rank) const { return ranks_[rank]->pid(); }

  // Waits for every rank up to `timeout` from the start; stragglers are killed (timed_out).
  std::vector<ProcessResult> wait_all(std::chrono::seconds timeout) {
    std::vector<Process*> ranks;
    for (auto& r : ranks_)
      ranks.push_back(r.get());
    return test_util::wait_all(ranks, start_ + timeout);
  }

 private:
  std::chrono::steady_clock::time_point start_;
  std::vector<std::unique_ptr<Process>> ranks_;
};

// The steps rank 0 of the distributed test worker's `loop` reported in DIR/progress (0 before the
// first).
inline int worker_progress(const std::string& dir) {
  int steps = 0;
  std::istringstream(file_contents(dir + "/progress")) >> steps;
  return steps;
}

// The tensors a worker saved with torch::save.
inline std::vector<torch::Tensor> saved_tensors(const std::string& path) {
  std::vector<torch::Tensor> tensors;
  torch::load(tensors, path);
  return tensors;
}

}  // namespace chexscale::test_util
