// The distributed-job flags shared by every subcommand that joins a job (train, bench, commbench,
// env): backend, timeouts, explicit overrides of the environment contract, and the gradient
// reducer's options. Declared once here so every command spells and documents them the same way.
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "distributed/context.h"
#include "distributed/reducer.h"

namespace chexscale::cli {

// Flags whose values need converting after parsing (names -> enums, seconds -> durations).
struct DistributedFlags {
  distributed::DistOptions options;
  std::string backend = distributed::to_string(distributed::DistOptions{}.backend);
  std::string device = distributed::to_string(distributed::DistOptions{}.device);
  std::string mpi_allreduce = distributed::to_string(distributed::DistOptions{}.mpi_allreduce);
  std::string hierarchical = distributed::to_string(distributed::DistOptions{}.hierarchical);
  int rdzv_timeout_s = static_cast<int>(distributed::kDefaultRdzvTimeout.count());
  int collective_timeout_s = static_cast<int>(distributed::kDefaultCollectiveTimeout.count());

  // The options with the converted flags filled in, validated.
  distributed::DistOptions resolved() const;
};

// Adds --backend, --hierarchical, --mpi-allreduce, --device, --rdzv-timeout,
// --collective-timeout, --rank, --world-size, --local-rank, --local-world-size, --master-addr,
// --master-port.
void add_distributed_flags(CLI::App& cmd, DistributedFlags& flags);

struct ReducerFlags {
  distributed::ReducerOptions options;
  std::string compression = distributed::compression_spec(distributed::ReducerOptions{});
  bool no_overlap = false;
  bool no_shared_memory = false;

  // The options with the converted flags filled in, validated.
  distributed::ReducerOptions resolved() const;
};

// Adds --bucket-mb, --first-bucket-mb, --no-overlap, --no-shared-memory, --grad-compression,
// --powersgd-start-step, --powersgd-min-rate.
void add_reducer_flags(CLI::App& cmd, ReducerFlags& flags);

}  // namespace chexscale::cli
